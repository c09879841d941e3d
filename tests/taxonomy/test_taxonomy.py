from __future__ import annotations

from pathlib import Path

import pytest

from vhd.labels import CATEGORIES, read_labels
from vhd.taxonomy import TaxonomyError, default_taxonomy, load_taxonomy, parse_taxonomy

PAPER_NAMES = [
    "Violence and Threats",
    "Substance Misuse",
    "Animal Welfare and Environmental Safeguarding",
    "Mental Health and Self-Harm",
    "Child Endangerment",
    "Explicit and Sexual Content",
    "Discriminatory Content and Cultural Insensitivity",
    "Privacy and Consent Violation",
    "Body Image and Beauty Standards",
    "Misinformation and Deceptive Content",
]


def good() -> dict[str, object]:
    return {
        "version": "1",
        "categories": [
            {"code": "A", "name": "Gore", "definition": "Blood and injuries.", "examples": ["bloody scene"]},
            {"code": "B", "name": "Hate", "definition": "Hate symbols and slurs."},
        ],
    }


def test_default_taxonomy_is_the_papers_ten() -> None:
    tax = load_taxonomy()
    assert tax is default_taxonomy()
    assert tax.key == "vhd11k@1.0"
    assert tax.codes == list("ABCDEFGHIJ")
    assert tax.names == PAPER_NAMES
    assert all(c.definition and len(c.examples) >= 5 for c in tax)
    assert (tax.unharmful.code, tax.unharmful.name) == ("K", "Unharmful")
    assert [name for _, name in CATEGORIES] == PAPER_NAMES  # labels.py reads the taxonomy


def test_lookup_by_code_name_and_coded_name() -> None:
    tax = load_taxonomy()
    assert tax.get("f").name == "Explicit and Sexual Content"
    assert tax.get("explicit & sexual content").code == "F"
    assert tax.get("  G. discriminatory content and cultural insensitivity ").code == "G"
    assert tax.find("K") is None and tax.find("unharmful") is None
    assert tax.find("k", unharmful=True) is tax.unharmful
    assert tax.is_unharmful("Unharmful") and tax.is_unharmful("K") and not tax.is_unharmful("A")
    assert tax.normalize("gambling") == "gambling"
    with pytest.raises(TaxonomyError, match=r"a code \(A-J\)"):
        tax.get("Z")
    with pytest.raises(ValueError, match="A-J"):
        tax.normalize("Z")


def test_yaml_round_trip_and_digest(tmp_path: Path) -> None:
    tax = load_taxonomy()
    path = tmp_path / "copy.yaml"
    path.write_text(tax.to_yaml(), encoding="utf-8")
    again = load_taxonomy(path)
    assert again.to_dict() == tax.to_dict() and again.digest == tax.digest
    edited = path.read_text().replace("bloody scene", "gory scene")
    path.write_text(edited)
    assert load_taxonomy(path).digest != tax.digest


def test_toml_taxonomy(tmp_path: Path) -> None:
    path = tmp_path / "policy.toml"
    path.write_text(
        'version = 3\n[[categories]]\ncode = "x"\nname = "Weapons"\ndefinition = "Guns and knives."\n'
        'examples = ["rifle"]\n[[categories]]\ncode = "K"\nname = "Gambling"\ndefinition = "Betting."\n'
    )
    tax = load_taxonomy(path)
    assert tax.key == "policy@3" and tax.codes == ["X", "K"]
    assert tax.unharmful.code == "L"  # K is taken: the next free letter


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["categories"].append({"code": "a", "name": "Other", "definition": "x"}), "duplicate code 'A'"),
        (lambda d: d["categories"].append({"code": "C", "name": "gore", "definition": "x"}), "duplicate name"),
        (lambda d: d["categories"][1].update(definition="  "), r"categories\[1\] \(B. Hate\): 'definition' is missing"),
        (lambda d: d["categories"][1].pop("definition"), "'definition' is missing or empty"),
        (lambda d: d.update(colour="red"), "unknown key 'colour'"),
        (lambda d: d["categories"][0].update(colour="red"), r"categories\[0\]: unknown key 'colour'"),
        (lambda d: d.pop("version"), "'version' is missing"),
        (lambda d: d["categories"][0].update(code="AB"), "must be one letter A-Z"),
        (lambda d: d["categories"][0].update(code="1"), "must be one letter A-Z"),
        (lambda d: d["categories"][0].update(name=""), "'name' is missing"),
        (lambda d: d["categories"][0].update(examples="bloody"), "'examples' must be a list"),
        (lambda d: d.update(categories=[]), "non-empty list"),
        (lambda d: d.update(unharmful={"code": "A", "name": "Safe"}), "unharmful: code 'A' is also"),
        (lambda d: d.update(unharmful={"code": "Z", "name": "gore"}), "also a category name"),
    ],
)
def test_validation_errors_are_one_clear_line(change: object, message: str) -> None:
    data = good()
    change(data)  # type: ignore[operator]
    with pytest.raises(TaxonomyError, match=message) as info:
        parse_taxonomy(data, "policy.yaml")
    text = str(info.value)
    assert "\n" not in text and text.startswith("policy.yaml: ")


def test_file_errors(tmp_path: Path) -> None:
    with pytest.raises(TaxonomyError, match="cannot read taxonomy file"):
        load_taxonomy(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\ncategories: [\n")
    with pytest.raises(TaxonomyError, match="cannot parse taxonomy file"):
        load_taxonomy(bad)
    listing = tmp_path / "list.yaml"
    listing.write_text("- a\n- b\n")
    with pytest.raises(TaxonomyError, match="must hold a mapping"):
        load_taxonomy(listing)


def test_labels_read_categories_with_a_custom_taxonomy(tmp_path: Path) -> None:
    tax = parse_taxonomy(good(), "mine")
    labels = tmp_path / "labels.csv"
    labels.write_text("id,harmful,categories\n" + "a" * 64 + ",yes,A;hate\n" + "b" * 64 + ",yes,C\n")
    read = read_labels(labels, taxonomy=tax)
    assert read.rows[0].categories == ["Gore", "Hate"]
    assert [e.line for e in read.errors] == [3]  # C is no code of this taxonomy
    assert read_labels(labels).rows[0].categories == ["Violence and Threats", "hate"]
