"""Blackjack rules, free of any server: the deck, hand values, the dealer's play, the player's action."""

from __future__ import annotations

import random
import re

RANKS = ("A", "2", "3", "4", "5", "6", "7", "8", "9", "10", "J", "Q", "K")
TARGET = 21
DEALER_STANDS_AT = 17
# `[^<]*` cannot run past the next tag, so the search stays linear however the text is built.
ACTION_TAG = re.compile(r"<action>([^<]*)</action>", re.IGNORECASE)
ACTIONS = ("hit", "stand")


def new_deck(rng: random.Random) -> list[str]:
    """One shuffled 52-card deck; cards are dealt from its end."""
    deck = list(RANKS) * 4
    rng.shuffle(deck)
    return deck


def card_value(card: str) -> int:
    if card == "A":
        return 11
    return 10 if card in ("J", "Q", "K") else int(card)


def hand_value(cards: list[str]) -> int:
    """Faces count 10, an ace 11, and each ace drops to 1 while the hand would otherwise be over 21."""
    total = sum(card_value(card) for card in cards)
    soft_aces = cards.count("A")
    while total > TARGET and soft_aces:
        total -= 10
        soft_aces -= 1
    return total


def play_dealer(hand: list[str], deck: list[str]) -> None:
    """The dealer draws until the hand is worth 17 or more (standing on every 17)."""
    while hand_value(hand) < DEALER_STANDS_AT:
        hand.append(deck.pop())


def outcome(player: list[str], dealer: list[str]) -> tuple[str, float]:
    """(result, reward) once both hands are final; a player over 21 has lost whatever the dealer holds."""
    mine, theirs = hand_value(player), hand_value(dealer)
    if mine > TARGET:
        return "bust", -1.0
    if theirs > TARGET or mine > theirs:
        return "win", 1.0
    return ("draw", 0.0) if mine == theirs else ("loss", -1.0)


def parse_action(text: str) -> str | None:
    """The action of the last `<action>` tag, if it is hit or stand (any case, spaces around allowed)."""
    tags = ACTION_TAG.findall(text)
    choice = tags[-1].strip().lower() if tags else None
    return choice if choice in ACTIONS else None


def shown(cards: list[str]) -> str:
    return f"{', '.join(cards)} (value {hand_value(cards)})"
