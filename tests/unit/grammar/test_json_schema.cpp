// tests/unit/grammar/test_json_schema.cpp — JSON Schema to grammar on the corpus of
// tests/data/grammar/schemas.json (scripts/golden/gen_schema_corpus.py: every instance checked
// with the jsonschema package): valid instances, compact and indented, are sentences of the
// grammar; invalid ones (and valid ones outside the generated order) are not; schemas with what we
// cannot enforce are refused naming it. Integer ranges against every integer near them.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <random>
#include <string>

#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar_test_util.h"
#include "test_paths.h"

using namespace jllm;
using jllm::test::Match;

namespace {

nlohmann::ordered_json corpus() {
    return nlohmann::ordered_json::parse(test::read_file(test::data_dir() + "/grammar/schemas.json"));
}

}  // namespace

TEST(JsonSchema, CorpusValidAcceptedInvalidRefused) {
    const auto doc = corpus();
    ASSERT_GE(doc["cases"].size(), 40u);
    for (const auto& c : doc["cases"]) {
        const std::string name = c["name"].get<std::string>();
        SCOPED_TRACE(name);
        std::string gbnf;
        ASSERT_NO_THROW(gbnf = json_schema_to_gbnf(c["schema"].dump())) << c["schema"].dump();
        Grammar g;
        ASSERT_NO_THROW(g = parse_gbnf(gbnf)) << gbnf;
        ByteMachine bm(g);
        for (const auto& t : c["valid_texts"]) {
            EXPECT_EQ(test::match_text(bm, t.get<std::string>()), Match::Full) << t.get<std::string>() << "\n" << gbnf;
        }
        for (const auto& t : c["invalid_texts"]) {
            EXPECT_NE(test::match_text(bm, t.get<std::string>()), Match::Full) << t.get<std::string>() << "\n" << gbnf;
        }
    }
}

TEST(JsonSchema, WhatCannotBeEnforcedIsRefused) {
    const auto doc = corpus();
    for (const auto& e : doc["errors"]) {
        SCOPED_TRACE(e["name"].get<std::string>());
        try {
            (void)json_schema_to_gbnf(e["schema"].dump());
            ADD_FAILURE() << "converted: " << e["schema"].dump();
        } catch (const SchemaError& err) {
            EXPECT_NE(std::string(err.what()).find(e["message"].get<std::string>()), std::string::npos) << err.what();
        }
    }
    EXPECT_THROW(json_schema_to_gbnf("{not json"), SchemaError);
}

// Integer bounds against every integer in [-300, 300] (and a few large ones).
TEST(JsonSchema, IntegerRangesExact) {
    std::mt19937 rng(7);
    std::uniform_int_distribution<int> pick(-250, 250);
    for (int round = 0; round < 40; ++round) {
        int lo = pick(rng), hi = pick(rng);
        if (lo > hi) std::swap(lo, hi);
        const int kind = round % 3;  // both bounds, minimum only, maximum only
        nlohmann::json s = {{"type", "integer"}};
        if (kind != 2) s["minimum"] = lo;
        if (kind != 1) s["maximum"] = hi;
        SCOPED_TRACE(s.dump());
        ByteMachine bm(parse_gbnf(json_schema_to_gbnf(s.dump())));
        for (int v = -300; v <= 300; ++v) {
            const bool in = (kind == 2 || v >= lo) && (kind == 1 || v <= hi);
            EXPECT_EQ(test::match_text(bm, std::to_string(v)) == Match::Full, in) << v;
        }
        for (const char* big : {"123456", "-123456", "9999999999"}) {
            const long long v = std::stoll(big);
            const bool in = (kind == 2 || v >= lo) && (kind == 1 || v <= hi);
            EXPECT_EQ(test::match_text(bm, big) == Match::Full, in) << big;
        }
        EXPECT_NE(test::match_text(bm, "01"), Match::Full);
        EXPECT_NE(test::match_text(bm, "-0"), Match::Full);
    }
}

TEST(JsonSchema, LiteralsEscape) {
    EXPECT_EQ(gbnf_literal("a\"b\\c\n"), "\"a\\\"b\\\\c\\x0A\"");
    ByteMachine bm(parse_gbnf("root ::= " + gbnf_literal("say \"hi\"\t\\")));
    EXPECT_EQ(test::match_text(bm, "say \"hi\"\t\\"), Match::Full);
}
