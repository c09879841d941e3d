"""The user-facing errors."""


def test_missing_dependency_error_survives_pickling() -> None:
    import pickle

    from vhd.errors import MissingDependencyError

    err = pickle.loads(pickle.dumps(MissingDependencyError("imagehash", "dedup")))
    assert isinstance(err, MissingDependencyError) and err.extra == "dedup"
    assert str(err) == "imagehash is not installed: run `pip install 'vhd[dedup]'` (or `pip install imagehash`)"
