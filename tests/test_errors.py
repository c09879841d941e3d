"""The user-facing errors."""


def test_missing_dependency_error_survives_pickling() -> None:
    import pickle

    from vhd.errors import MissingDependencyError, pip_install

    err = pickle.loads(pickle.dumps(MissingDependencyError("imagehash", "dedup")))
    assert isinstance(err, MissingDependencyError) and err.extra == "dedup"
    hint = "run `" + pip_install("'vhd[dedup]'") + "` (or `" + pip_install("imagehash") + "`)"
    assert str(err) == f"imagehash is not installed: {hint}"
