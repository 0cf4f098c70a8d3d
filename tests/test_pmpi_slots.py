"""PMPI tool slots at generation time: which letters their continuation entries use
(never one an MPI or this mpi.h uses) and what qmpi_pmpi.c defines."""

from __future__ import annotations

import dataclasses
import re

import pytest

from qmpigen.errors import QmpigenError
from qmpigen.mpi.quirks import PMPI_SLOT_RESERVED
from qmpigen.output.cnames import PMPI_SLOTS, continuation
from qmpigen.output.render import GeneratorInfo, render_core

from conftest import QUIRKS, fixture_api, fixture_enumeration


def test_the_header_s_prefixed_names_are_recorded():
    facts = fixture_api(QUIRKS).facts
    assert "P" in facts.mpi_name_letters  # PMPI_ prototypes


def test_slot_letters_avoid_reserved_letters_and_the_header_s_names():
    facts = fixture_api(QUIRKS).facts
    letters = facts.pmpi_slot_letters
    assert len(letters) == len(set(letters)) == PMPI_SLOTS
    assert not set(letters) & (set(PMPI_SLOT_RESERVED) | set(facts.mpi_name_letters))
    crowded = dataclasses.replace(facts, mpi_name_letters=tuple(sorted(set(facts.mpi_name_letters) | {letters[0]})))
    assert letters[0] not in crowded.pmpi_slot_letters
    assert len(crowded.pmpi_slot_letters) == PMPI_SLOTS


def test_too_few_free_letters_is_an_error():
    facts = dataclasses.replace(fixture_api(QUIRKS).facts, mpi_name_letters=tuple("ABCDEFGHIJKLMNOPQRSTUVWXYZ"))
    with pytest.raises(QmpigenError, match="PMPI tool slots"):
        _ = facts.pmpi_slot_letters


def test_every_slot_continues_every_function_with_a_pmpi_twin():
    enumeration = fixture_enumeration(QUIRKS)
    text = render_core(enumeration, GeneratorInfo.for_enumeration(enumeration, "test"))["qmpi_pmpi.c"]
    slots = re.search(r"#define QMPI_EACH_PMPI_SLOT\(M\) (.*)", text).group(1)
    assert slots == " ".join(f"M({letter}, {k})" for k, letter in enumerate(enumeration.facts.pmpi_slot_letters))
    for f in enumeration:
        defined = f"L##{f.name}(" in text
        assert defined == (not f.is_macro and (not f.variadic or f.is_fan_out)), f.name
    assert continuation("Y", "MPI_Send") == "YMPI_Send"
