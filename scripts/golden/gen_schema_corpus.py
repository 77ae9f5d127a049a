#!/usr/bin/env python3
"""scripts/golden/gen_schema_corpus.py — writes tests/data/grammar/schemas.json: JSON Schemas (home-automation tool parameters, nested
objects, arrays, enums, refs, formats, patterns, ranges) with instances that are valid and invalid
under them, every instance checked here with the jsonschema package (Draft 2020-12), so the corpus
itself is right. Valid instances keep the schema's property order (the grammars generate that
order); each is stored as text, compact and indented."""
import json
import pathlib
import sys

import jsonschema

C = []


def case(name, schema, valid, invalid, outside=()):
    """outside: valid under the schema, but not in what the grammar generates (another property
    order, fewer prefix items), so the grammar refuses them."""
    C.append({"name": name, "schema": schema, "valid": valid, "invalid": invalid, "outside": list(outside)})


ent = {"type": "string", "pattern": "^[a-z_]+\\.[a-z0-9_]+$"}
case("light_turn_on", {"type": "object", "properties": {
    "entity_id": ent, "brightness": {"type": "integer", "minimum": 0, "maximum": 255},
    "color_name": {"type": "string", "enum": ["red", "green", "blue", "warm white"]}},
    "required": ["entity_id"], "additionalProperties": False},
    [{"entity_id": "light.kitchen"}, {"entity_id": "light.k2", "brightness": 255},
     {"entity_id": "light.a", "brightness": 0, "color_name": "warm white"}, {"entity_id": "light.a", "color_name": "red"}],
    [{}, {"entity_id": "Light.Kitchen"}, {"entity_id": "light.a", "brightness": 256},
     {"entity_id": "light.a", "brightness": -1}, {"entity_id": "light.a", "color_name": "pink"},
     {"entity_id": "light.a", "extra": 1}, {"entity_id": 5}])
case("climate_set_temperature", {"type": "object", "properties": {
    "entity_id": ent, "temperature": {"type": "number"},
    "hvac_mode": {"type": "string", "enum": ["off", "heat", "cool", "auto"]}},
    "required": ["entity_id", "temperature"]},
    [{"entity_id": "climate.living_room", "temperature": 21.5}, {"entity_id": "climate.x", "temperature": -3, "hvac_mode": "heat"},
     {"entity_id": "climate.x", "temperature": 1e2}],
    [{"entity_id": "climate.x"}, {"entity_id": "climate.x", "temperature": "21"},
     {"entity_id": "climate.x", "temperature": 20, "hvac_mode": "dry"}])
case("cover_position", {"type": "object", "properties": {
    "entity_id": ent, "position": {"type": "integer", "minimum": 0, "maximum": 100}},
    "required": ["entity_id", "position"], "additionalProperties": False},
    [{"entity_id": "cover.garage", "position": 0}, {"entity_id": "cover.garage", "position": 100},
     {"entity_id": "cover.garage", "position": 57}],
    [{"entity_id": "cover.garage", "position": 101}, {"entity_id": "cover.garage", "position": 5.5},
     {"position": 5}])
case("media_player_volume", {"type": "object", "properties": {
    "entity_id": ent, "volume_level": {"type": "number"}, "is_volume_muted": {"type": "boolean"}},
    "required": ["entity_id"]},
    [{"entity_id": "media_player.tv", "volume_level": 0.35}, {"entity_id": "media_player.tv", "is_volume_muted": True}],
    [{"entity_id": "media_player.tv", "is_volume_muted": "yes"}])
case("scene_list", {"type": "object", "properties": {
    "scenes": {"type": "array", "items": ent, "minItems": 1, "maxItems": 3}}, "required": ["scenes"]},
    [{"scenes": ["scene.movie"]}, {"scenes": ["scene.a", "scene.b", "scene.c"]}],
    [{"scenes": []}, {"scenes": ["scene.a", "scene.b", "scene.c", "scene.d"]}, {"scenes": ["bad"]}])
case("timer_start", {"type": "object", "properties": {
    "duration": {"type": "string", "pattern": "^[0-9]{2}:[0-5][0-9]:[0-5][0-9]$"}, "name": {"type": "string", "maxLength": 20}},
    "required": ["duration"]},
    [{"duration": "00:05:00"}, {"duration": "01:30:59", "name": "pasta"}],
    [{"duration": "5 minutes"}, {"duration": "00:60:00"}, {"duration": "00:05:00", "name": "x" * 21}])
case("notify", {"type": "object", "properties": {
    "message": {"type": "string", "minLength": 1}, "title": {"type": "string"},
    "target": {"type": ["string", "null"]}}, "required": ["message"]},
    [{"message": "Dinner is ready"}, {"message": "a", "title": "t", "target": None}, {"message": "é ü 日本", "target": "phone"}],
    [{"message": ""}, {"message": "x", "target": 3}])
case("calendar_event", {"type": "object", "properties": {
    "summary": {"type": "string"}, "start": {"type": "string", "format": "date-time"},
    "end": {"type": "string", "format": "date-time"}}, "required": ["summary", "start", "end"]},
    [{"summary": "Dentist", "start": "2026-12-03T09:00:00Z", "end": "2026-12-03T10:00:00+01:00"},
     {"summary": "x", "start": "2026-01-31T23:59:59.250Z", "end": "2026-02-01T00:00:00-05:00"}],
    [{"summary": "x", "start": "2026-13-03T09:00:00Z", "end": "2026-12-03T10:00:00Z"},
     {"summary": "x", "start": "tomorrow", "end": "2026-12-03T10:00:00Z"}])
case("date_only", {"type": "string", "format": "date"}, ["2026-12-01", "1999-01-09"], ["2026-1-1", "2026-00-10", "2026-12-32"])
case("time_only", {"type": "string", "format": "time"}, ["08:30:00Z", "23:59:59+02:00"], ["8:30", "24:00:00Z"])
case("uuid", {"type": "string", "format": "uuid"}, ["123e4567-e89b-12d3-a456-426614174000"],
     ["123e4567e89b12d3a456426614174000", "123e4567-e89b-12d3-a456-42661417400g"])
case("enum_mixed", {"enum": ["on", "off", 1, 0, True, None]}, ["on", 1, True, None], ["maybe", 2, False])
case("const_object", {"const": {"a": 1, "b": [True, None]}}, [{"a": 1, "b": [True, None]}], [{"a": 2, "b": [True, None]}])
case("integer_negative_range", {"type": "integer", "minimum": -40, "maximum": -5}, [-40, -5, -17], [-41, -4, 0, 10])
case("integer_cross_zero", {"type": "integer", "minimum": -12, "maximum": 130}, [-12, 0, 9, 10, 99, 130], [-13, 131, 1000])
case("integer_min_only", {"type": "integer", "minimum": 18}, [18, 19, 99, 100, 123456], [17, 0, -5])
case("integer_max_only", {"type": "integer", "maximum": 7}, [7, 0, -1, -999999], [8, 10, 70])
case("integer_exclusive", {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 10}, [1, 9], [0, 10])
case("number_plain", {"type": "number"}, [0, -1.5, 3e8, 12345.678], ["1", None])
# Bounded numbers: integral bounds, no exponent in what the grammar generates.
case("number_range", {"type": "number", "minimum": 5, "maximum": 35}, [5, 35, 21, 21.5, 5.25, 34.999, 35.0],
     [4.99, 35.01, 36, -5, 0, 100])
case("number_negative_range", {"type": "number", "minimum": -40, "maximum": -2}, [-40, -2, -2.5, -39.9, -10, -40.0],
     [-1.5, -40.1, 0, 3, -41])
case("number_exclusive_cross_zero", {"type": "number", "exclusiveMinimum": -1, "exclusiveMaximum": 1},
     [0, -0.5, 0.999, 0.0, -0.25], [1, -1, 1.0, -1.0, 1.5, -2])
case("number_min_only", {"type": "number", "minimum": 0}, [0, 0.5, 12, 123456.75], [-0.5, -1])
case("number_exclusive_max_zero", {"type": "number", "exclusiveMaximum": 0}, [-0.5, -3, -100.25], [0, 0.0, 1, 0.5])
case("boolean", {"type": "boolean"}, [True, False], [0, "true"])
case("null", {"type": "null"}, [None], [0, False])
case("nullable_integer", {"type": ["integer", "null"]}, [None, 5], [5.5, "5"])
case("string_length", {"type": "string", "minLength": 2, "maxLength": 4}, ["ab", "abcd", "é€"], ["a", "abcde"])
case("pattern_unanchored", {"type": "string", "pattern": "[0-9]{3}"}, ["abc123", "999", "a 000 z"], ["ab12", "x"])
case("pattern_alternation", {"type": "string", "pattern": "^(on|off|toggle)$"}, ["on", "toggle"], ["onn", "Off"])
case("pattern_escapes", {"type": "string", "pattern": "^\\d+(\\.\\d+)?\\s?(kWh|W)$"}, ["12 W", "3.5kWh", "100 kWh"], ["W", "3.W"])
case("pattern_quotes", {"type": "string", "pattern": "^say \"[a-z]+\"$"}, ["say \"hi\""], ["say hi", "say \"HI\""])
case("array_of_objects", {"type": "array", "items": {"type": "object", "properties": {
    "name": {"type": "string"}, "state": {"type": "string", "enum": ["on", "off"]}}, "required": ["name", "state"],
    "additionalProperties": False}},
    [[], [{"name": "lamp", "state": "on"}, {"name": "fan", "state": "off"}]],
    [[{"name": "lamp"}], [{"name": "lamp", "state": "dim"}], {"name": "lamp", "state": "on"}])
case("array_bounds", {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2}, [[1, 2]], [[1], [1, 2, 3], [1, "2"]])
case("prefix_items", {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": False},
     [["temp", 21]], [["temp", 21, 3], [21, "temp"]], outside=[["temp"]])
case("prefix_then_items", {"type": "array", "prefixItems": [{"const": "rgb"}], "items": {"type": "integer", "minimum": 0,
     "maximum": 255}, "maxItems": 4}, [["rgb", 255, 0, 10], ["rgb"]], [["rgb", 256], ["hsv", 1], ["rgb", 1, 2, 3, 4]])
case("nested_objects", {"type": "object", "properties": {
    "area": {"type": "object", "properties": {"name": {"type": "string"}, "floor": {"type": "integer"}},
             "required": ["name"], "additionalProperties": False},
    "devices": {"type": "array", "items": {"type": "string"}}}, "required": ["area", "devices"], "additionalProperties": False},
    [{"area": {"name": "kitchen", "floor": 0}, "devices": ["light.k"]}, {"area": {"name": "attic"}, "devices": []}],
    [{"area": {"floor": 1}, "devices": []}, {"area": {"name": "x", "roof": 1}, "devices": []}, {"area": "kitchen", "devices": []}])
case("refs", {"$defs": {"entity": ent, "pair": {"type": "object", "properties": {"from": {"$ref": "#/$defs/entity"},
     "to": {"$ref": "#/$defs/entity"}}, "required": ["from", "to"], "additionalProperties": False}},
     "type": "array", "items": {"$ref": "#/$defs/pair"}},
    [[{"from": "switch.a", "to": "light.b"}]], [[{"from": "switch.a"}], [{"from": "A", "to": "light.b"}]])
case("recursive_ref", {"$defs": {"node": {"type": "object", "properties": {"name": {"type": "string"},
     "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}, "required": ["name"], "additionalProperties": False}},
     "$ref": "#/$defs/node"},
    [{"name": "home", "children": [{"name": "floor 1", "children": [{"name": "kitchen"}]}]}, {"name": "leaf"}],
    [{"children": []}, {"name": "x", "children": [{"children": []}]}])
case("definitions_ref", {"definitions": {"mode": {"enum": ["eco", "boost"]}}, "type": "object",
     "properties": {"mode": {"$ref": "#/definitions/mode"}}, "required": ["mode"]}, [{"mode": "eco"}], [{"mode": "turbo"}])
case("any_of", {"anyOf": [{"type": "integer", "minimum": 0, "maximum": 10}, {"type": "string", "enum": ["low", "high"]}]},
     [0, 10, "low"], [11, "medium", None])
case("one_of_objects", {"oneOf": [
    {"type": "object", "properties": {"kind": {"const": "light"}, "brightness": {"type": "integer", "minimum": 0, "maximum": 255}},
     "required": ["kind", "brightness"], "additionalProperties": False},
    {"type": "object", "properties": {"kind": {"const": "switch"}, "on": {"type": "boolean"}}, "required": ["kind", "on"],
     "additionalProperties": False}]},
    [{"kind": "light", "brightness": 10}, {"kind": "switch", "on": False}],
    [{"kind": "light", "on": True}, {"kind": "fan", "on": True}])
case("all_of_closed", {"allOf": [
    {"type": "object", "properties": {"entity_id": ent, "delay": {"type": "integer"}}, "required": ["entity_id"]},
    {"type": "object", "properties": {"entity_id": {"type": "string"}, "delay": {"type": "integer", "minimum": 0,
     "maximum": 3600}}, "additionalProperties": False}]},
    [{"entity_id": "switch.pump", "delay": 30}, {"entity_id": "switch.pump"}],
    [{"entity_id": "switch.pump", "delay": 30, "x": 1}, {"entity_id": "Switch", "delay": 30}, {"entity_id": "switch.pump", "delay": -1}])
case("all_of_open", {"allOf": [
    {"type": "object", "properties": {"entity_id": ent}, "required": ["entity_id"]},
    {"type": "object", "properties": {"delay": {"type": "integer", "minimum": 0, "maximum": 3600}}}]},
    [{"entity_id": "switch.pump", "delay": 30}, {"entity_id": "switch.pump"}], [{"delay": 30}, {"entity_id": "switch.pump", "delay": -1}],
    outside=[{"delay": 30, "entity_id": "switch.pump"}, {"entity_id": "switch.pump", "other": 1}])
case("additional_properties_schema", {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0,
     "maximum": 9}}, [{}, {"a": 1, "bb": 9}], [{"a": 10}, {"a": "1"}])
case("additional_properties_false_empty", {"type": "object", "properties": {}, "additionalProperties": False}, [{}], [{"a": 1}])
case("free_object", {"type": "object"}, [{}, {"x": [1, {"y": None}], "z": "w"}], [[], "x"])
case("any_value", {}, [1, "x", None, [], {"a": [True]}], [])
case("optional_middle", {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"},
     "c": {"type": "integer"}}, "required": ["a", "c"], "additionalProperties": False},
    [{"a": 1, "c": 3}, {"a": 1, "b": 2, "c": 3}], [{"a": 1, "b": 2}, {"b": 2, "c": 3}], outside=[{"a": 1, "c": 3, "b": 2}])
case("all_optional", {"type": "object", "properties": {"x": {"type": "boolean"}, "y": {"type": "boolean"}},
     "additionalProperties": False}, [{}, {"x": True}, {"y": False}, {"x": True, "y": False}], [{"z": True}])
case("string_enum_with_escapes", {"type": "string", "enum": ["say \"hi\"", "back\\slash", "tab\tx"]},
     ["say \"hi\"", "back\\slash", "tab\tx"], ["say hi"])
case("unicode_property_names", {"type": "object", "properties": {"température": {"type": "number"}, "状态": {"type": "string"}},
     "required": ["température", "状态"]}, [{"température": 21, "状态": "开"}], [{"temperature": 21, "状态": "开"}])
case("ha_script_call", {"type": "object", "properties": {
    "name": {"type": "string", "enum": ["HassTurnOn", "HassTurnOff", "HassLightSet", "HassClimateSetTemperature"]},
    "arguments": {"type": "object", "properties": {"name": {"type": "string"}, "area": {"type": "string"},
                  "domain": {"type": "array", "items": {"type": "string", "enum": ["light", "switch", "fan", "cover"]}}},
                  "additionalProperties": False}},
    "required": ["name", "arguments"], "additionalProperties": False},
    [{"name": "HassTurnOn", "arguments": {"name": "kitchen light"}}, {"name": "HassTurnOff", "arguments": {"area": "bedroom",
     "domain": ["light", "fan"]}}, {"name": "HassLightSet", "arguments": {}}],
    [{"name": "HassDance", "arguments": {}}, {"name": "HassTurnOn", "arguments": {"domain": ["toaster"]}}, {"name": "HassTurnOn"}])

# Schemas the converter must refuse (SchemaError whose message holds the fragment).
ERRORS = [
    ("unsupported_keyword", {"type": "array", "uniqueItems": True}, "'uniqueItems'"),
    ("unsupported_keyword_nested", {"type": "object", "properties": {"a": {"type": "string", "contentEncoding": "base64"}}},
     "'contentEncoding' at #/properties/a"),
    ("number_fractional_bound", {"type": "number", "minimum": 0.5}, "'minimum' on a number: integral bounds only"),
    ("number_empty_bounds", {"type": "number", "exclusiveMinimum": 3, "maximum": 3}, "no number between"),
    ("unknown_format", {"type": "string", "format": "email"}, "unsupported format 'email'"),
    ("bad_ref", {"$ref": "#/$defs/missing"}, "names no definition"),
    ("external_ref", {"$ref": "https://example.com/s.json"}, "only #/$defs"),
    ("lookahead", {"type": "string", "pattern": "^(?=a)a$"}, "lookaround"),
    ("backreference", {"type": "string", "pattern": "^(a)\\1$"}, "backreferences"),
    ("false_schema", {"type": "object", "properties": {"a": False}, "required": ["a"]}, "admits no value"),
    ("required_missing", {"type": "object", "properties": {"a": {}}, "required": ["b"]}, "'b' is not in properties"),
    ("unsatisfiable_all_of", {"allOf": [{"type": "object", "properties": {"a": {}}, "required": ["a"]},
                              {"type": "object", "properties": {"b": {}}, "additionalProperties": False}]}, "'a'"),
    ("empty_bounds", {"type": "integer", "minimum": 5, "maximum": 4}, "no integer"),
    ("unknown_type", {"type": "decimal"}, "unknown type"),
    ("not_keyword", {"not": {"type": "string"}}, "'not'"),
]


def texts(v):
    out = [json.dumps(v, ensure_ascii=False, separators=(",", ":")), json.dumps(v, ensure_ascii=False)]
    if isinstance(v, (dict, list)) and v:
        out.append(json.dumps(v, ensure_ascii=False, indent=2))
    return out


def main():
    fail = 0
    for c in C:
        v = jsonschema.Draft202012Validator(c["schema"], format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
        for x in c["valid"]:
            if not v.is_valid(x):
                print(f"{c['name']}: valid instance rejected by jsonschema: {x!r}", file=sys.stderr)
                fail = 1
        for x in c["invalid"]:
            if v.is_valid(x):
                print(f"{c['name']}: invalid instance accepted by jsonschema: {x!r}", file=sys.stderr)
                fail = 1
        for x in c["outside"]:
            if not v.is_valid(x):
                print(f"{c['name']}: 'outside' instance rejected by jsonschema: {x!r}", file=sys.stderr)
                fail = 1
        c["valid_texts"] = [t for x in c["valid"] for t in texts(x)]
        c["invalid_texts"] = [t for x in c["invalid"] + c["outside"] for t in texts(x)]
        del c["valid"], c["invalid"], c["outside"]
    if fail:
        sys.exit(1)
    out = pathlib.Path(__file__).resolve().parents[2] / "tests" / "data" / "grammar" / "schemas.json"
    doc = {"cases": C, "errors": [{"name": n, "schema": sc, "message": m} for n, sc, m in ERRORS]}
    out.write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {len(C)} schemas to {out}")


if __name__ == "__main__":
    main()
