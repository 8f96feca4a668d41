"""A bring-your-own-agent program written with the official `openai` client, as
tests/serve/agent_endpoint_test.cpp runs it through Aspen's AgentProgram: a two-turn
calculator episode held through /v1/chat/completions with tools, the session id sent
as `user`, each assistant message carried back verbatim and a tool message added.

stdin: one JSON row: {"question", "seed", "max_tokens", "seen_path", "mode"?}
stdout: {"reward": x}
It writes what the client saw (the messages it sent, the replies with their tokens and
log-probs) to row["seen_path"] for the test to compare with Aspen's trajectory.

mode "wrong_session": sends another session id (its calls are refused) and still
prints a reward. mode "late": prints its reward first, then calls (refused as late).
"""
import json
import os
import sys

import openai

TOOLS = [{"type": "function",
          "function": {"name": "calculator", "description": "Exact arithmetic.",
                       "parameters": {"type": "object",
                                      "properties": {"expression": {"type": "string"}},
                                      "required": ["expression"]}}}]


def main():
    row = json.loads(sys.stdin.readline())
    client = openai.OpenAI(base_url=os.environ["OPENAI_BASE_URL"],
                           api_key=os.environ["OPENAI_API_KEY"], max_retries=0)
    session = os.environ["ASPEN_SESSION"]
    mode = row.get("mode", "")
    if mode == "wrong_session":
        session = "0" * 32
    messages = [{"role": "user", "content": row["question"]}]
    seen = {"turns": [], "errors": []}

    def call(turn):
        sent = json.loads(json.dumps(messages))
        reply = client.chat.completions.create(
            model="tiny", messages=messages, tools=TOOLS, user=session,
            max_tokens=row["max_tokens"], seed=row["seed"] + turn, logprobs=True)
        choice = reply.choices[0]
        message = choice.message.model_dump(exclude_none=True)
        seen["turns"].append({
            "sent": sent, "message": message, "finish_reason": choice.finish_reason,
            "tokens": [t.token for t in choice.logprobs.content],
            "logprobs": [t.logprob for t in choice.logprobs.content]})
        return message

    if mode == "late":
        print(json.dumps({"reward": 0.5}), flush=True)
    try:
        for turn in range(2):
            messages.append(call(turn))
            if turn == 0:
                messages.append({"role": "tool", "tool_call_id": "call_0",
                                 "content": "121932631112635269"})
    except openai.APIStatusError as error:
        seen["errors"].append({"status": error.status_code, "message": str(error)})
    with open(row["seen_path"], "w") as out:
        json.dump(seen, out)
    if mode != "late":
        print(json.dumps({"reward": 1.0}))


if __name__ == "__main__":
    main()
