// tests/unit/engine/test_text_stream.cpp — stop strings across pieces and think splitting.
#include <gtest/gtest.h>

#include "engine/text_stream.h"

using namespace jllm;

namespace {
// Feeds `pieces` and returns (emitted text, stopped).
std::pair<std::string, bool> run_stop(std::vector<std::string> stops, const std::vector<std::string>& pieces) {
    StopMatcher m(std::move(stops));
    std::string out;
    bool stopped = false;
    for (const std::string& p : pieces) {
        out += m.push(p, &stopped);
        if (stopped) return {out, true};
    }
    out += m.flush();
    return {out, false};
}
}  // namespace

TEST(StopMatcher, AcrossPieces) {
    auto [out, stopped] = run_stop({"END"}, {"hello E", "N", "D and more"});
    EXPECT_TRUE(stopped);
    EXPECT_EQ(out, "hello ");
}

TEST(StopMatcher, FalseStartIsReleased) {
    StopMatcher m({"STOP"});
    bool s = false;
    EXPECT_EQ(m.push("ab ST", &s), "ab ");  // "ST" held back
    EXPECT_EQ(m.push("x", &s), "STx");
    EXPECT_FALSE(s);
}

TEST(StopMatcher, EarliestOfSeveral) {
    auto [out, stopped] = run_stop({"\n\n", "User:"}, {"a User: b\n\n"});
    EXPECT_TRUE(stopped);
    EXPECT_EQ(out, "a ");
}

TEST(StopMatcher, NamesTheStopThatEndedIt) {
    StopMatcher m({"zz", "b", "ab"});
    bool s = false;
    EXPECT_EQ(m.matched(), "");
    EXPECT_EQ(m.push("xx a", &s), "xx ");  // "a" may start "ab": held back
    EXPECT_FALSE(s);
    EXPECT_EQ(m.matched(), "");
    EXPECT_EQ(m.push("b tail", &s), "");  // "ab" at 0 wins over "b" at 1
    EXPECT_TRUE(s);
    EXPECT_EQ(m.matched(), "ab");
    StopMatcher none({"END"});
    EXPECT_EQ(none.push("no stop here", &s), "no stop here");
    EXPECT_EQ(none.matched(), "");
}

TEST(StopMatcher, NoStopsPassesThrough) {
    auto [out, stopped] = run_stop({}, {"x", "y"});
    EXPECT_FALSE(stopped);
    EXPECT_EQ(out, "xy");
}

TEST(StopMatcher, TailFlushedAtEnd) {
    auto [out, stopped] = run_stop({"abc"}, {"xxab"});
    EXPECT_FALSE(stopped);
    EXPECT_EQ(out, "xxab");
}

namespace {
std::pair<std::string, std::string> run_think(bool enabled, bool open, const std::vector<std::string>& pieces) {
    ThinkSplitter t(enabled, open);
    std::vector<std::pair<Channel, std::string>> parts;
    for (const std::string& p : pieces) t.push(p, parts);
    t.flush(parts);
    std::string content, reasoning;
    for (auto& [ch, s] : parts) (ch == Channel::Reasoning ? reasoning : content) += s;
    return {content, reasoning};
}
}  // namespace

TEST(ThinkSplitter, SplitsTagsAcrossPieces) {
    auto [c, r] = run_think(true, false, {"<thi", "nk>\nplan", " it</th", "ink>\n\nThe answer"});
    EXPECT_EQ(r, "plan it");
    EXPECT_EQ(c, "The answer");
}

TEST(ThinkSplitter, StartsOpen) {
    auto [c, r] = run_think(true, true, {"\nreason</think>\n\nok"});
    EXPECT_EQ(r, "reason");
    EXPECT_EQ(c, "ok");
}

TEST(ThinkSplitter, DisabledKeepsTags) {
    auto [c, r] = run_think(false, false, {"<think>x</think>y"});
    EXPECT_EQ(c, "<think>x</think>y");
    EXPECT_EQ(r, "");
}

TEST(ThinkSplitter, UnclosedThinkingStaysReasoning) {
    auto [c, r] = run_think(true, false, {"<think>still going <"});
    EXPECT_EQ(r, "still going <");
    EXPECT_EQ(c, "");
}
