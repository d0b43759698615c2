"""Generated tasks with known answers, one per family, for `minitf quickstart` and the tests.

Each task is made from a seed with Python's `random` (no download, no torch) and split into training and
held-out examples that share no item, so a held-out score above chance shows what the model learned rather
than what it memorized:

- `number_words`: "342: three hundred forty-two" lines (gpt family). A held-out number's spelling follows from its
  digits, so greedy exact match on unseen numbers measures learning; chance is 0.
- `paraphrase_pairs`: (sentence, paraphrase) pairs built from slots of synonyms (encoder family). Held-out
  pairs are unseen slot combinations; top-1 retrieval among them has chance 1/len(held_out).
- `english_italian_pairs`: a small English-to-Italian grammar with gender agreement and the adjective after
  the noun (seq2seq family). Held-out sentences are unseen combinations.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from itertools import product

_ONES = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen"
).split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()


@dataclass(frozen=True)
class Split:
    """Training and held-out examples of a task."""

    train: list
    held_out: list


def number_to_words(number: int) -> str:
    """English words for 0 <= number <= 999, e.g. 342 -> "three hundred forty-two"."""
    if not 0 <= number <= 999:
        raise ValueError(f"number_to_words covers 0..999, got {number}.")
    hundreds, rest = divmod(number, 100)
    words = [f"{_ONES[hundreds]} hundred"] if hundreds else []
    if rest or not hundreds:
        tens, ones = divmod(rest, 10)
        words.append(_ONES[rest] if rest < 20 else _TENS[tens] + (f"-{_ONES[ones]}" if ones else ""))
    return " ".join(words)


def number_words(held_out: int = 100, seed: int = 0) -> Split:
    """Lines "N: words" for 0..999 in random order, `held_out` of them (random numbers >= 100) kept apart."""
    rng = random.Random(seed)
    numbers = list(range(1000))
    kept = set(rng.sample(numbers[100:], held_out))
    train = [number for number in numbers if number not in kept]
    rng.shuffle(train)  # in order, the next line's number would be predictable: learn spelling, not counting
    return Split(
        [f"{number}: {number_to_words(number)}" for number in train],
        [f"{number}: {number_to_words(number)}" for number in sorted(kept)],
    )


_SUBJECTS = [
    ["the cat", "a kitten", "the kitty"],
    ["the dog", "a puppy", "the hound"],
    ["the child", "a kid", "the youngster"],
    ["the farmer", "a grower", "the peasant"],
    ["the teacher", "a tutor", "the instructor"],
    ["the doctor", "a physician", "the medic"],
    ["the bird", "a sparrow", "the songbird"],
    ["the sailor", "a seaman", "the mariner"],
]
_VERBS = [
    ["eats", "devours", "consumes"],
    ["sees", "watches", "spots"],
    ["likes", "enjoys", "loves"],
    ["buys", "purchases", "acquires"],
    ["paints", "draws", "sketches"],
    ["carries", "holds", "totes"],
    ["finds", "discovers", "locates"],
    ["cleans", "washes", "scrubs"],
]
_OBJECTS = [
    ["an apple", "a fruit", "the pear"],
    ["a car", "the vehicle", "an automobile"],
    ["a book", "the novel", "a story"],
    ["a boat", "the ship", "a vessel"],
    ["a hat", "the cap", "a bonnet"],
    ["a stone", "the rock", "a pebble"],
    ["a letter", "the note", "a message"],
    ["a cake", "the pastry", "a pie"],
]
_PLACES = [
    ["in the garden", "in the yard", "among the flowers"],
    ["at home", "in the house", "indoors"],
    ["by the river", "near the stream", "at the bank"],
    ["in the city", "downtown", "in town"],
    ["at night", "after dark", "in the evening"],
    ["on the hill", "up the slope", "on the mountain"],
]


def _paraphrase(meaning: tuple[int, ...], rng: random.Random) -> str:
    subject, verb, obj, place = (
        rng.choice(options[index]) for options, index in zip((_SUBJECTS, _VERBS, _OBJECTS, _PLACES), meaning)
    )
    if rng.random() < 0.5:
        return f"{subject} {verb} {obj} {place}"
    return f"{place} , {subject} {verb} {obj}"


def paraphrase_pairs(train: int = 2000, held_out: int = 200, seed: int = 0) -> Split:
    """(sentence, paraphrase) pairs: the same subject, verb, object and place in other words or order."""
    meanings = list(product(*(range(len(slot)) for slot in (_SUBJECTS, _VERBS, _OBJECTS, _PLACES))))
    if train + held_out > len(meanings):
        raise ValueError(f"paraphrase_pairs has {len(meanings)} meanings; asked for {train} + {held_out}.")
    rng = random.Random(seed)
    chosen = rng.sample(meanings, train + held_out)

    def pair(meaning: tuple[int, ...]) -> tuple[str, str]:
        first = _paraphrase(meaning, rng)
        second = _paraphrase(meaning, rng)
        while second == first:
            second = _paraphrase(meaning, rng)
        return first, second

    pairs = [pair(meaning) for meaning in chosen]
    return Split(pairs[:train], pairs[train:])


# English word -> (Italian word, gender) for nouns; adjectives -> (masculine, feminine).
_NOUNS = {
    "cat": ("gatto", "m"),
    "dog": ("cane", "m"),
    "boy": ("ragazzo", "m"),
    "book": ("libro", "m"),
    "horse": ("cavallo", "m"),
    "girl": ("ragazza", "f"),
    "house": ("casa", "f"),
    "table": ("tavola", "f"),
    "door": ("porta", "f"),
    "cow": ("mucca", "f"),
}
_ADJECTIVES = {
    "red": ("rosso", "rossa"),
    "small": ("piccolo", "piccola"),
    "new": ("nuovo", "nuova"),
    "old": ("vecchio", "vecchia"),
    "black": ("nero", "nera"),
    "white": ("bianco", "bianca"),
    "beautiful": ("bello", "bella"),
}
_VERBS_IT = {"sees": "vede", "eats": "mangia", "takes": "prende", "finds": "trova", "wants": "vuole", "loves": "ama"}
_ARTICLES = {"the": {"m": "il", "f": "la"}, "a": {"m": "un", "f": "una"}}


def _noun_phrase(article: str, adjective: str, noun: str) -> tuple[str, str]:
    italian, gender = _NOUNS[noun]
    feminine = gender == "f"
    return (
        f"{article} {adjective} {noun}",
        f"{_ARTICLES[article][gender]} {italian} {_ADJECTIVES[adjective][feminine]}",
    )


def english_italian_pairs(train: int = 3000, held_out: int = 200, seed: int = 0) -> Split:
    """("the red cat sees a small girl", "il gatto rosso vede una ragazza piccola") pairs."""
    rng = random.Random(seed)
    seen: set[tuple[str, str]] = set()
    while len(seen) < train + held_out:
        subject = _noun_phrase(rng.choice(list(_ARTICLES)), rng.choice(list(_ADJECTIVES)), rng.choice(list(_NOUNS)))
        obj = _noun_phrase(rng.choice(list(_ARTICLES)), rng.choice(list(_ADJECTIVES)), rng.choice(list(_NOUNS)))
        verb = rng.choice(list(_VERBS_IT))
        seen.add((f"{subject[0]} {verb} {obj[0]}", f"{subject[1]} {_VERBS_IT[verb]} {obj[1]}"))
    pairs = sorted(seen)
    rng.shuffle(pairs)
    return Split(pairs[:train], pairs[train:])


__all__ = ["Split", "english_italian_pairs", "number_to_words", "number_words", "paraphrase_pairs"]
