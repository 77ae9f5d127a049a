// grammar/json_schema.h — JSON Schema (a draft 2020-12 subset) to a GBNF grammar whose sentences
// are JSON documents valid under the schema:
//   type (a name or an array of names; "null" in the array makes a value nullable), properties,
//   required, additionalProperties (false, true or a schema), enum, const, items, prefixItems,
//   minItems / maxItems, minLength / maxLength, pattern (regex subset below), format (date,
//   time, date-time, uuid), integer minimum / maximum / exclusiveMinimum / exclusiveMaximum,
//   anyOf / oneOf (an instance matches at least one branch), allOf of object schemas, $ref to
//   #/$defs/NAME or #/definitions/NAME (recursion allowed).
// Annotations (title, description, default, examples, $schema, $id, $comment, deprecated,
// readOnly, writeOnly, strict) are ignored; any other keyword throws SchemaError naming it and
// where it is: a constraint is enforced or refused, never dropped.
// Objects carry the properties the schema names, in its order; additionalProperties true or a
// schema beside named properties generates the named ones only (every such document is valid).
// pattern: literals, ., escapes (\d \w \s \D \W \S and escaped punctuation), classes with ranges
// and negation, groups ( ) (?: ), |, * + ? {n} {n,} {n,m} (lazy forms too), ^ and $ at the ends;
// unanchored ends take any text. Backreferences, lookaround and \b throw SchemaError.
#pragma once

#include <string>
#include <string_view>

#include "core/error.h"

namespace jllm {

class SchemaError : public JllmError {
public:
    using JllmError::JllmError;
};

// The schema as JSON text; throws SchemaError (also for text that is not JSON).
std::string json_schema_to_gbnf(std::string_view schema_json);

// Any JSON object (response_format json_object).
std::string json_object_gbnf();

// For grammars that embed schemas (tool calls): the schema's rules, its instances those of rule
// `name` (the other rules named after it), without the JSON primitives every such grammar needs
// once (json_primitives_gbnf: ws, string, number, integer, boolean, null, value, object, array).
std::string json_schema_rules(std::string_view schema_json, const std::string& name);
std::string json_primitives_gbnf();

// A JSON string holding exactly `text` (its GBNF literal, for grammars that quote values).
std::string gbnf_literal(std::string_view text);

}  // namespace jllm
