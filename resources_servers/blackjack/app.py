"""blackjack: one hand against the dealer, a reset/step environment (`nemo_gym.envkit.gymnasium_server`).

Reset deals two cards each from a freshly shuffled deck (seeded by the row's `seed` when it has one) and
shows the player's hand and the dealer's up-card. Each step reads `<action>hit</action>` or
`<action>stand</action>` from the model's reply; anything else counts as stand. Hitting past 21 is a bust
(reward -1); standing lets the dealer draw to 17 and settles the hand: +1 win, 0 draw, -1 loss.
"""

import random
from typing import Any

from pydantic import BaseModel

from nemo_gym.envkit.gymnasium_server import GymnasiumServer, StepResult, extract_text, parse_metadata
from nemo_gym.openai_utils import NeMoGymResponse
from resources_servers.blackjack.game import (
    TARGET,
    hand_value,
    new_deck,
    outcome,
    parse_action,
    play_dealer,
    shown,
)

ASK = "Hit or stand? Answer with <action>hit</action> or <action>stand</action>."
RESULTS = ("win", "draw", "loss", "bust")


class BlackjackTask(BaseModel):
    seed: int | None = None


class BlackjackServer(GymnasiumServer):
    async def reset(self, metadata: dict[str, Any], session_id: str) -> tuple[str | None, dict[str, Any]]:
        task = parse_metadata(BlackjackTask, metadata)
        deck = new_deck(random.Random(task.seed))
        player, dealer = [deck.pop(), deck.pop()], [deck.pop(), deck.pop()]
        self.episode_state(session_id).update(deck=deck, player=player, dealer=dealer)
        return f"Your hand: {shown(player)}. The dealer shows {dealer[0]}. {ASK}", {}

    async def step(self, action: NeMoGymResponse, metadata: dict[str, Any], session_id: str) -> StepResult:
        state = self.episode_state(session_id)
        player, dealer, deck = state["player"], state["dealer"], state["deck"]
        parsed = parse_action(extract_text(action))
        info: dict[str, Any] = {"action": parsed or "stand", "parsed": parsed is not None}
        if parsed == "hit":
            player.append(deck.pop())
            if hand_value(player) <= TARGET:
                return f"You drew {player[-1]}. Your hand: {shown(player)}. {ASK}", 0.0, False, False, info
        else:
            play_dealer(dealer, deck)
        result, reward = outcome(player, dealer)
        info.update(result=result, player_hand=player, dealer_hand=dealer)
        return (
            f"Your hand: {shown(player)}. Dealer: {shown(dealer)}. Result: {result}.",
            reward,
            True,
            False,
            info,
        )

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        """Share of rollouts per result, in percent; an episode cut short has no result and counts in none."""
        infos = [rollout.get("info") for rollouts in tasks for rollout in rollouts]
        results = [info.get("result") if isinstance(info, dict) else None for info in infos]
        if not results:  # every rollout failed
            return {}
        return {f"rate/{name}": 100 * results.count(name) / len(results) for name in RESULTS}


if __name__ == "__main__":
    BlackjackServer.run_webserver()
