"""OpenFGA's authorization model in the protobuf form its SQL stores keep: the JSON that
OpenFGA's own CLI writes for tests/moving/openfga_model.fga (``fga model transform``, kept in
openfga_model.json) goes through bastion's message declarations and back unchanged, and
reads as the same model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from google.protobuf.struct_pb2 import Struct

from bastion.core.fga.dsl_parser import parse_model
from bastion.core.fga.dsl_printer import print_model
from bastion.core.fga.model import model_from_json
from bastion.moving.openfga_wire import (
    decode_context,
    decode_model,
    decode_type_definition,
    encode_model,
)

HERE = Path(__file__).parent
CLI_JSON = json.loads((HERE / "openfga_model.json").read_text())


def test_the_clis_json_model_survives_the_wire_form() -> None:
    raw = encode_model(CLI_JSON)
    assert decode_model(raw) == CLI_JSON
    dsl = (HERE / "openfga_model.fga").read_text()
    assert print_model(model_from_json(decode_model(raw))) == print_model(parse_model(dsl))


def test_a_type_definition_row_of_an_older_store_decodes() -> None:
    group = next(t for t in CLI_JSON["type_definitions"] if t["type"] == "group")
    raw = encode_model({"schema_version": "1.1", "type_definitions": [group]})
    assert decode_model(raw)["type_definitions"] == [group]
    # the type's own message: the last field of ``raw``, from its first field (``type``,
    # tag 0x0a, length 5) to the end
    assert decode_type_definition(raw[raw.index(b"\x0a\x05group") :]) == group


def test_a_condition_context_is_a_struct() -> None:
    struct = Struct()
    struct.update({"ip": "10.1.2.3", "allowed": ["a", "b"], "n": 3})
    assert decode_context(struct.SerializeToString()) == {
        "ip": "10.1.2.3", "allowed": ["a", "b"], "n": 3.0,
    }  # fmt: skip
    assert decode_context(None) is None
    assert decode_context(b"") is None


def test_bytes_that_are_no_model_are_refused() -> None:
    with pytest.raises(ValueError, match="not an OpenFGA authorization model"):
        decode_model(b"\xff\xff\xff")
