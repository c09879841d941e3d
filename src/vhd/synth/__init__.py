"""The synthetic half: prompt expansion (`vhd prompts`) and generation with provenance (`vhd generate`).

Modules: `floor` (the safety floor), `prompts` (expanding keywords into scene prompts),
`provenance` (prompt ids, derived seeds, the record embedded in files), `generators` (the
diffusers pipelines behind one interface, registered in `GENERATORS`), `outputs` (PNG/MP4
encoding, watermark), `rows` (prompt CSVs, first frames), `batch` (the pure per-prompt work),
`work` (that work for an executor's workers: ``--executor ray``) and `generate` (the driver).
Importing this package imports none of torch, diffusers or numpy.
"""
