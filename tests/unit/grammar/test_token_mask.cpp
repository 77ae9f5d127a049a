// tests/unit/grammar/test_token_mask.cpp — the trie walk's masks against a brute-force scan of the
// whole vocabulary (every token's bytes stepped through the byte machine) on random states of
// several grammars, for the Qwen3 and Llama-3 vocabularies; end of generation only where the
// grammar is complete; the mask cache serves repeated states.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "grammar/gbnf.h"
#include "grammar/token_mask.h"
#include "tok_test_util.h"
#include "tokenizer/tokenizer.h"

using namespace jllm;

namespace {

const char* const JSON_GBNF = R"(
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
array  ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}) )* "\"" ws
number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9]+)? ws
ws     ::= [ \t\n]{0,4}
)";

const char* const TOOL_GBNF = R"(
root ::= "<tool_call>\n{\"name\": \"" name "\", \"arguments\": {\"entity_id\": \"" id "\"}}\n</tool_call>"
name ::= "light.turn_on" | "light.turn_off" | "climate.set_temperature"
id   ::= [a-z_]+ "." [a-z0-9_]+
)";

const char* const TEXT_GBNF = "root ::= [^\\n]{0,40} \"\\n\" ( \"Sí\" | \"日本語\" | \"\xF0\x9F\x98\x80\" )\n";

// What the mask must be at `s`: every token whose bytes the machine takes from `s`, the
// end-of-generation tokens where `s` is complete.
std::vector<uint32_t> brute_force(ByteMachine& bm, ByteMachine::State s, const VocabTrie& trie) {
    std::vector<uint32_t> m(trie.words(), 0u);
    for (int32_t t = 0; t < trie.n_vocab(); ++t) {
        const std::string& p = trie.pieces_[static_cast<size_t>(t)];
        if (p.empty()) continue;
        ByteMachine::State x = s;
        for (char c : p) {
            x = bm.step(x, static_cast<uint8_t>(c));
            if (x == ByteMachine::DEAD) break;
        }
        if (x != ByteMachine::DEAD) m[static_cast<size_t>(t) >> 5] |= 1u << (t & 31);
    }
    if (bm.accepting(s)) {
        for (int32_t e : trie.eog()) m[static_cast<size_t>(e) >> 5] |= 1u << (e & 31);
    }
    return m;
}

std::vector<int32_t> allowed(const uint32_t* mask, size_t words) {
    std::vector<int32_t> out;
    for (size_t w = 0; w < words; ++w) {
        for (int b = 0; b < 32; ++b) {
            if (mask[w] >> b & 1u) out.push_back(static_cast<int32_t>(w * 32 + static_cast<size_t>(b)));
        }
    }
    return out;
}

// Random walks of `steps` tokens through `gbnf`, each step's mask against the brute force
// (computed on a second machine of the same grammar, which the matcher under test never sees).
void check_walks(const Tokenizer& tok, const char* gbnf, int walks, int steps, uint32_t seed) {
    auto trie = std::make_shared<const VocabTrie>(tok);
    std::mt19937 rng(seed);
    for (int w = 0; w < walks; ++w) {
        GrammarMatcher m(parse_gbnf(gbnf), trie);
        ByteMachine ref(parse_gbnf(gbnf));
        ByteMachine::State rs = ref.initial();
        for (int i = 0; i < steps; ++i) {
            const uint32_t* mask = m.mask();
            const std::vector<uint32_t> expect = brute_force(ref, rs, *trie);
            ASSERT_EQ(std::vector<uint32_t>(mask, mask + trie->words()), expect) << "walk " << w << " step " << i;
            std::vector<int32_t> ok = allowed(mask, trie->words());
            ASSERT_FALSE(ok.empty()) << "walk " << w << " step " << i << ": a dead end";
            // Prefer text over ending, so walks get deep.
            std::vector<int32_t> text;
            for (int32_t t : ok) {
                if (!tok.is_eog(t)) text.push_back(t);
            }
            if (text.empty()) {
                EXPECT_TRUE(m.accepting());
                break;
            }
            const int32_t t = text[std::uniform_int_distribution<size_t>(0, text.size() - 1)(rng)];
            ASSERT_TRUE(m.accept(t));
            for (char c : trie->pieces_[static_cast<size_t>(t)]) rs = ref.step(rs, static_cast<uint8_t>(c));
            ASSERT_NE(rs, ByteMachine::DEAD);
        }
    }
}

}  // namespace

TEST(TokenMask, EqualsBruteForceQwen3) {
    const Tokenizer& tok = test::hf_tokenizer("qwen3");
    check_walks(tok, JSON_GBNF, 3, 40, 1);
    check_walks(tok, TOOL_GBNF, 3, 30, 2);
    check_walks(tok, TEXT_GBNF, 3, 20, 3);
}

TEST(TokenMask, EqualsBruteForceLlama3) {
    const Tokenizer& tok = test::hf_tokenizer("llama3");
    check_walks(tok, JSON_GBNF, 3, 40, 4);
    check_walks(tok, TOOL_GBNF, 2, 30, 5);
    check_walks(tok, TEXT_GBNF, 2, 20, 6);
}

// End of generation only where the grammar is complete; a finished grammar allows only it.
TEST(TokenMask, EndOfGenerationOnlyWhereComplete) {
    const Tokenizer& tok = test::hf_tokenizer("qwen3");
    auto trie = std::make_shared<const VocabTrie>(tok);
    GrammarMatcher m(parse_gbnf("root ::= \"yes\" | \"yes!\""), trie);
    auto eog_allowed = [&](const uint32_t* mask) {
        for (int32_t e : trie->eog()) {
            if (!(mask[static_cast<size_t>(e) >> 5] >> (e & 31) & 1u)) return false;
        }
        return !trie->eog().empty();
    };
    EXPECT_FALSE(eog_allowed(m.mask()));
    ASSERT_TRUE(m.accept_text("yes"));
    EXPECT_TRUE(m.accepting());
    EXPECT_FALSE(m.finished());
    EXPECT_TRUE(eog_allowed(m.mask()));
    ASSERT_TRUE(m.accept_text("!"));
    EXPECT_TRUE(m.finished());
    const std::vector<int32_t> only = allowed(m.mask(), trie->words());
    EXPECT_EQ(only, trie->eog());
    EXPECT_FALSE(m.accept_text("?"));
    EXPECT_TRUE(m.accept(trie->eog()[0]));
}

TEST(TokenMask, RepeatedStatesComeFromTheCache) {
    const Tokenizer& tok = test::hf_tokenizer("qwen3");
    auto trie = std::make_shared<const VocabTrie>(tok);
    GrammarMatcher m(parse_gbnf(R"(root ::= "\"" [a-z ]* "\"")"), trie);
    ASSERT_TRUE(m.accept_text("\""));
    (void)m.mask();
    const int64_t walks = m.walks();
    for (const char* piece : {"hello", " world", " and", " more"}) {
        ASSERT_TRUE(m.accept_text(piece));
        (void)m.mask();  // inside the string: the same state every time
    }
    EXPECT_EQ(m.walks(), walks);
    EXPECT_GE(m.cache_hits(), 4);
}
