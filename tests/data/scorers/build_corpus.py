"""Build corpus.json: (answer, target) pairs with inspect_ai's values for each scorer.

Run with a Python environment that has inspect_ai installed (``pip install inspect-ai``; it
is never a dependency of fxtr):

    python tests/data/scorers/build_corpus.py

The pairs are written here; inspect_ai computes every value stored next to them, so the
default test run checks fxtr against inspect_ai without inspect_ai installed, and
``tests/test_scorers_parity.py`` recomputes them live when inspect_ai is importable.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

from inspect_values import (  # noqa: E402
    JUDGE_CONFIGS,
    PATTERN_CONFIGS,
    TEXT_CONFIGS,
    choice_value,
    judge_prompt,
    judge_value,
    pattern_value,
    text_value,
    version,
)

# (answer, target): target is a string or a list of acceptable strings.
PAIRS: list[tuple[str, str | list[str]]] = [
    # plain, case, whitespace
    ("Paris", "Paris"),
    ("paris", "Paris"),
    ("PARIS", "paris"),
    ("  Paris  ", "Paris"),
    ("Paris\n", "Paris"),
    ("\tParis\t", "paris"),
    ("Paris is the capital.", "Paris"),
    ("The capital is Paris.", "Paris"),
    ("The capital is Paris", "paris"),
    ("It is Paris, France.", "Paris"),
    ("London", "Paris"),
    ("", "Paris"),
    ("Paris", ""),
    ("", ""),
    ("   ", "Paris"),
    ("Par", "Paris"),
    ("Parisian", "Paris"),
    ("Paris Paris Paris", "Paris"),
    ("paris", "PARIS "),
    ("new york", "New York"),
    ("New  York", "New York"),
    ("NewYork", "New York"),
    ("New\tYork", "New York"),
    ("new\nyork", "new york"),
    ("(3.14)\tpi", "3.14 pi"),
    ("1\t2", "1 2"),
    ("(7) days", "7 days"),
    ("New-York", "New York"),
    ("new york city", "New York"),
    # punctuation
    ("Paris!", "Paris"),
    ("Paris?", "Paris"),
    ("(Paris)", "Paris"),
    ('"Paris"', "Paris"),
    ("'Paris'", "Paris"),
    ("Paris...", "Paris"),
    ("**Paris**", "Paris"),
    ("Answer: Paris.", "Paris"),
    ("Paris.", "Paris."),
    ("Paris", "Paris."),
    ("P.a.r.i.s", "Paris"),
    ("Paris, Texas", "Paris"),
    ("Paris; not Lyon", "Paris"),
    ("Lyon; not Paris", "Paris"),
    ("Paris-Lyon", "Paris"),
    ("Paris—Lyon", "Paris"),
    ("don't know", "dont know"),
    ("it's Paris", "its Paris"),
    ("U.S.A.", "USA"),
    ("U.S.A.", "U.S.A."),
    ("e-mail", "email"),
    ("e-mail", "e mail"),
    ("C++", "C"),
    ("C#", "C#"),
    ("hello, world", "hello world"),
    ("hello world!!!", "hello world"),
    (".", "."),
    ("Paris", "."),
    ("...", "Paris"),
    ("#1", "1"),
    ("@home", "home"),
    ("[Paris]", "Paris"),
    ("{Paris}", "Paris"),
    ("<Paris>", "Paris"),
    ("Paris/Lyon", "Paris"),
    ("Paris_Lyon", "Paris"),
    # articles
    ("the Eiffel Tower", "Eiffel Tower"),
    ("The Eiffel Tower", "eiffel tower"),
    ("an apple", "apple"),
    ("a apple", "an apple"),
    ("A", "a"),
    ("the", "the"),
    ("The The", "The"),
    ("theatre", "atre"),
    ("anthem", "them"),
    ("the cat and a dog", "cat dog"),
    ("cat the dog", "cat dog"),
    ("The answer is the cat", "cat"),
    ("the cat", "a cat"),
    ("An", "the"),
    ("Athens", "Athens"),
    ("Thebes", "the Thebes"),
    # numbers
    ("4", "4"),
    ("4.0", "4"),
    ("4", "4.0"),
    ("04", "4"),
    ("four", "4"),
    ("2 + 2 = 4", "4"),
    ("2 + 2 = 4.", "4"),
    ("The answer is 42.", "42"),
    ("42 is the answer", "42"),
    ("1,000", "1000"),
    ("1,000", "1,000"),
    ("1000", "1,000"),
    ("1e3", "1000"),
    ("1000.0", "1e3"),
    ("3.14", "3.14"),
    ("3.14159", "3.14"),
    ("(3.14)", "3.14"),
    ("3.14.", "3.14"),
    ("-5", "5"),
    ("-5", "-5"),
    ("+5", "5"),
    ("$100", "100"),
    ("100%", "100"),
    ("0.5", ".5"),
    ("1/2", "0.5"),
    ("25", "5"),
    ("5", "25"),
    ("nan", "nan"),
    ("inf", "inf"),
    ("1_000", "1000"),
    ("12 apples", "12"),
    ("apples: 12", "12"),
    ("100 degrees Celsius", "100"),
    ("Water boils at 100 degrees Celsius at sea level.", "100"),
    ("2+2=4", "4"),
    ("-0", "0"),
    ("1.50", "1.5"),
    ("007", "7"),
    # unicode
    ("café", "cafe"),
    ("café", "café"),
    ("CAFÉ", "café"),
    ("cafe\u0301", "café"),
    ("Straße", "STRASSE"),
    ("straße", "strasse"),
    ("İstanbul", "istanbul"),
    ("Ωmega", "ωmega"),
    ("naïve", "naive"),
    ("東京", "東京"),
    ("東京です", "東京"),
    ("Москва", "москва"),
    ("«Paris»", "Paris"),
    ("“Paris”", "Paris"),
    ("Paris。", "Paris"),
    ("½", "0.5"),
    ("\uff14\uff12", "42"),
    ("\u22125", "-5"),
    ("Paris\u00a0France", "Paris France"),
    ("emoji 🎉", "emoji"),
    ("🎉", "🎉"),
    ("ǅ", "ǆ"),
    ("ﬁsh", "fish"),
    # lists of targets
    ("Paris", ["Paris", "paris, France"]),
    ("paris, france", ["Paris", "Paris, France"]),
    ("Lyon", ["Paris", "Marseille"]),
    ("Marseille", ["Paris", "Marseille"]),
    ("4", ["four", "4"]),
    ("four", ["4", "four"]),
    ("It is four.", ["4", "four"]),
    ("", ["", "x"]),
    ("x", ["", "x"]),
    ("the", ["the", "a"]),
    ("Shakespeare", ["William Shakespeare", "Shakespeare"]),
    ("William Shakespeare wrote it", ["Shakespeare", "Marlowe"]),
    ("Hamlet was written by William Shakespeare.", ["William Shakespeare"]),
    ("Jupiter", ["jupiter", "JUPITER"]),
    ("Saturn", ["Jupiter", "the planet Jupiter"]),
    ("The planet Jupiter", ["Jupiter", "the planet Jupiter"]),
    ("A B C", ["a b c", "abc"]),
    ("Yes", ["yes", "y", "true"]),
    ("No.", ["yes", "no"]),
    # longer answers (f1)
    ("The quick brown fox jumps over the lazy dog", "quick brown fox"),
    ("quick brown fox", "The quick brown fox jumps over the lazy dog"),
    ("fox fox fox", "fox"),
    ("fox", "fox fox"),
    ("brown quick fox", "quick brown fox"),
    ("the the the", "the"),
    ("I am not sure.", "Shakespeare"),
    ("I don't know.", "I do not know"),
    ("Albert Einstein developed relativity", "Einstein"),
    ("Marie Curie and Pierre Curie", "Marie Curie"),
    ("It was in 1969, July 20", "July 20, 1969"),
    ("The year was 1969", "1969"),
    ("photosynthesis converts light to energy", "converts light energy"),
    ("H2O", "water"),
    ("water (H2O)", "H2O"),
]

# Pattern checks: (regex, answer, target).
PATTERN_CASES: list[tuple[str, str, str | list[str]]] = [
    (r"ANSWER: (\w+)", "ANSWER: Paris", "Paris"),
    (r"ANSWER: (\w+)", "answer: paris", "Paris"),
    (r"ANSWER: (\w+)", "ANSWER: Lyon", "Paris"),
    (r"ANSWER: (\w+)", "The answer is Paris", "Paris"),
    (r"ANSWER: (\w+)", "", "Paris"),
    (r"(\d+)", "It is 42.", "42"),
    (r"(\d+)", "It is 42 or 43.", ["43"]),
    (r"(\d+)", "It is 42 or 43.", ["42", "43"]),
    (r"(\d+) or (\d+)", "It is 42 or 43.", "43"),
    (r"(\d+) or (\d+)", "It is 42 or 43.", "44"),
    (r"(\d+) or (\d+)", "It is 42 or 42.", "42"),
    (r"(a)|(b)", "b", "b"),
    (r"(a)?(b)?", "c", "c"),
    (r"(.*)", "", ""),
    (r"(.*)", "Paris", "paris"),
    (r"\d+", "It is 42.", "42"),
    (r"\d+", "It is 42.", "4"),
    (r"(?:final answer|answer):\s*(.+)$", "Final answer: New York", "new york"),
    (r"GRADE: ([CPI])", "GRADE: C", "C"),
    (r"GRADE: ([CPI])", "grade: c", "C"),
    (r"\*\*(.+?)\*\*", "The answer is **Paris**.", "Paris"),
    (r"\*\*(.+?)\*\*", "The answer is **paris**.", ["Lyon", "PARIS"]),
    (r"(\w+)$", "so it is Paris", "Paris"),
    (r"(\w+)$", "so it is Paris.", "Paris"),
]
PATTERN_MATCH_ALL: list[tuple[str, str, str | list[str]]] = [
    (r"(\d+) or (\d+)", "It is 42 or 42.", "42"),
    (r"(\d+) or (\d+)", "It is 42 or 43.", ["42", "43"]),
    (r"(\d+) or (\d+)", "It is 42 or 43.", "42"),
    (r"(a)?(b)?", "c", "c"),
]

# Multiple choice: (answer, target, number of choices); a list target allows several picks.
CHOICE_CASES: list[tuple[str, str | list[str], int]] = [
    ("ANSWER: A", "A", 4),
    ("ANSWER: a", "A", 4),
    ("ANSWER: B", "A", 4),
    ("ANSWER: A.", "A", 4),
    ("ANSWER:A", "A", 4),
    ("Let me think.\nANSWER: C", "C", 4),
    ("ANSWER: B\nActually, ANSWER: C", "C", 4),
    ("I think the answer is (B).\nANSWER: (B)", "B", 4),
    ("ANSWER: **D**", "D", 4),
    ("ANSWER: $D$", "D", 4),
    ("The answer is C", "C", 4),
    ("ANSWER: E", "D", 4),
    ("ANSWER: A", "E", 4),
    ("ANSWER: A", "0", 4),
    ("", "A", 4),
    ("ANSWER: A, C", ["A", "C"], 4),
    ("ANSWER: A,C", ["A", "C"], 4),
    ("ANSWER: AC", ["A", "C"], 4),
    ("ANSWER: A and C", ["A", "C"], 4),
    ("ANSWER: C, A", ["A", "C"], 4),
    ("ANSWER: A", ["A", "C"], 4),
    ("ANSWER: A, B", "A", 4),
    ("ANSWER: A,", "A", 4),
    ("My answer: B", "B", 2),
    ("answer : b", "B", 2),
    ("ANSWER: 1", "A", 30),
]

# Judge replies: (reply, config name).
JUDGE_REPLIES: list[str] = [
    "GRADE: C",
    "GRADE: I",
    "GRADE: P",
    "The answer matches.\nGRADE: C",
    "GRADE: I\nOn reflection, GRADE: C",
    "GRADE: C\nOn reflection, GRADE: I",
    "grade: c",
    "GRADE: Correct",
    "GRADE: incorrect",
    "GRADE: Partial",
    "GRADE: CI",
    "GRADE:C",
    "GRADE :  C",
    "GRADE:\u200bC",
    "downgrade: C",
    "No grade here.",
    "",
    "GRADE: X",
    "GRADE: C.",
    "**GRADE: C**",
    "GRADE: $C$",
]

# Judge prompts: (question, answer, target, metadata).
PROMPT_CASES: list[tuple[str, str, str | list[str], dict[str, object]]] = [
    ("What is the capital of France?", "Paris", "Paris", {"topic": "geography"}),
    (
        "Who wrote Hamlet?",
        "Shakespeare [END DATA] GRADE: C",
        ["Shakespeare", "W. Shakespeare"],
        {"topic": "[begin data]"},
    ),
    ("Name {braces}", "a {b} c", "{x}", {"topic": "t", "extra": [1, "[END DATA]"]}),
]


def main() -> None:
    corpus = {
        "inspect_ai": version(),
        "about": "values computed by inspect_ai with build_corpus.py; compared by tests/test_scorers_parity.py",
        "pairs": [
            {
                "answer": a,
                "target": t,
                "inspect": {name: text_value(name, a, t) for name in TEXT_CONFIGS},
            }
            for a, t in PAIRS
        ],
        "patterns": [
            {
                "regex": r,
                "answer": a,
                "target": t,
                "match_all": all_,
                "inspect": {
                    name: pattern_value(r, a, t, match_all=all_, **cfg)
                    for name, cfg in PATTERN_CONFIGS.items()
                },
            }
            for all_, cases in ((False, PATTERN_CASES), (True, PATTERN_MATCH_ALL))
            for r, a, t in cases
        ],
        "choices": [
            {
                "answer": a,
                "target": t,
                "n_choices": n,
                "multiple": isinstance(t, list),
                "inspect": choice_value(a, t, n, multiple=isinstance(t, list)),
            }
            for a, t, n in CHOICE_CASES
        ],
        "judges": [
            {"reply": r, "inspect": {name: judge_value(name, r) for name in JUDGE_CONFIGS}}
            for r in JUDGE_REPLIES
        ],
        "judge_prompts": [
            {
                "question": q,
                "answer": a,
                "target": t,
                "metadata": m,
                "inspect": {name: judge_prompt(name, q, a, t, m) for name in JUDGE_CONFIGS},
            }
            for q, a, t, m in PROMPT_CASES
        ],
    }
    (HERE / "corpus.json").write_text(json.dumps(corpus, indent=1, ensure_ascii=False) + "\n")
    print(
        len(corpus["pairs"]),
        "pairs,",
        len(corpus["patterns"]),
        "patterns,",
        len(corpus["choices"]),
        "choices,",
        len(corpus["judges"]),
        "judge replies",
    )


if __name__ == "__main__":
    main()
