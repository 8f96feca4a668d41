"""Drives `aspen serve` with the official `openai` Python client (a real client, as
the tests require) and prints what it saw as one JSON object on stdout.

usage: openai_client_check.py BASE_URL MODEL_NAME

The C++ test (tests/cli/serve_command_test.cpp) asserts on the observations; this
script only asserts what the client itself must be able to do (parse every response).
"""
import concurrent.futures
import json
import sys
import urllib.request

import openai


def main():
    base_url, model = sys.argv[1], sys.argv[2]
    client = openai.OpenAI(base_url=base_url + "/v1", api_key="unused", max_retries=0)
    seen = {}

    with urllib.request.urlopen(base_url + "/health") as response:
        seen["health_status"] = response.status
    seen["models"] = [m.id for m in client.models.list().data]

    greedy = client.completions.create(model=model, prompt="Hello, my name is", max_tokens=8,
                                       temperature=0, logprobs=0)
    seen["greedy"] = {
        "text": greedy.choices[0].text,
        "finish_reason": greedy.choices[0].finish_reason,
        "usage": greedy.usage.model_dump(),
        "tokens": greedy.choices[0].logprobs.tokens,
        "token_logprobs": greedy.choices[0].logprobs.token_logprobs,
        "object": greedy.object,
    }

    chunks = list(client.completions.create(model=model, prompt="Hello, my name is", max_tokens=8,
                                            temperature=0, stream=True,
                                            stream_options={"include_usage": True}))
    text_chunks = [c for c in chunks if c.choices]
    seen["greedy_stream"] = {
        "text": "".join(c.choices[0].text for c in text_chunks),
        "finish_reason": text_chunks[-1].choices[0].finish_reason,
        "chunks": len(chunks),
        "usage": chunks[-1].usage.model_dump() if chunks[-1].usage else None,
    }

    # Several prompts in one request: choices numbered prompt x n + sample.
    batch = client.completions.create(model=model, prompt=["One", "Two two"], n=2, max_tokens=5,
                                      temperature=1.0, seed=3)
    seen["batch"] = {"indices": [c.index for c in batch.choices],
                     "usage": batch.usage.model_dump()}

    def chat(stream, **kwargs):
        request = dict(model=model, messages=[{"role": "user", "content": "What is 2+2?"}],
                       max_tokens=10, temperature=1.0, seed=7, n=2, **kwargs)
        if not stream:
            response = client.chat.completions.create(**request)
            return {"texts": [c.message.content for c in response.choices],
                    "roles": [c.message.role for c in response.choices],
                    "finish": [c.finish_reason for c in response.choices],
                    "object": response.object,
                    "usage": response.usage.model_dump(),
                    "logprob_counts": [len(c.logprobs.content) if c.logprobs else None
                                       for c in response.choices]}
        texts = {}
        roles = {}
        for chunk in client.chat.completions.create(stream=True, **request):
            for choice in chunk.choices:
                texts[choice.index] = texts.get(choice.index, "") + (choice.delta.content or "")
                if choice.delta.role:
                    roles[choice.index] = choice.delta.role
        return {"texts": [texts[i] for i in sorted(texts)], "roles": [roles[i] for i in sorted(roles)]}

    seen["chat"] = chat(False, logprobs=True)
    seen["chat_again"] = chat(False)
    seen["chat_stream"] = chat(True)

    # A stop string taken from the greedy text: the text must end right before it.
    greedy_text = seen["greedy"]["text"]
    stop = greedy_text[3:6] if len(greedy_text) >= 6 else None
    if stop:
        stopped = client.completions.create(model=model, prompt="Hello, my name is", max_tokens=8,
                                            temperature=0, stop=[stop])
        streamed = "".join(c.choices[0].text for c in client.completions.create(
            model=model, prompt="Hello, my name is", max_tokens=8, temperature=0, stop=[stop],
            stream=True) if c.choices)
        seen["stop"] = {"stop": stop, "text": stopped.choices[0].text,
                        "finish_reason": stopped.choices[0].finish_reason, "stream_text": streamed}

    errors = {}
    for name, call in {
        "negative_temperature": lambda: client.completions.create(
            model=model, prompt="x", temperature=-1),
        "unknown_model": lambda: client.completions.create(model="no-such-model", prompt="x"),
        "top_logprobs": lambda: client.completions.create(model=model, prompt="x", logprobs=3),
        "unknown_field": lambda: client.completions.create(model=model, prompt="x",
                                                            extra_body={"temprature": 0.5}),
        "empty_messages": lambda: client.chat.completions.create(model=model, messages=[]),
        "too_long": lambda: client.completions.create(model=model, prompt="x", max_tokens=10**9),
    }.items():
        try:
            call()
            errors[name] = {"status": None}
        except openai.APIStatusError as error:
            body = error.body if isinstance(error.body, dict) else {}
            errors[name] = {"status": error.status_code, "message": body.get("message"),
                            "param": body.get("param")}
    seen["errors"] = errors

    # Concurrent requests, answered while others decode. Greedy: a seeded draw on this
    # flat 151,936-token vocabulary may flip with the batch's floating point (see
    # rollout/engine.h), a greedy argmax does not.
    def one(i):
        response = client.completions.create(model=model, prompt=f"Count {i}:", max_tokens=12,
                                             temperature=0)
        return response.choices[0].text, response.usage.completion_tokens
    with concurrent.futures.ThreadPoolExecutor(max_workers=6) as pool:
        concurrent_results = list(pool.map(one, range(6)))
    sequential_results = [one(i) for i in range(6)]
    seen["concurrent"] = {"results": concurrent_results, "sequential": sequential_results}

    after = client.completions.create(model=model, prompt="Hello, my name is", max_tokens=8,
                                      temperature=0)
    seen["after_errors_text"] = after.choices[0].text
    json.dump(seen, sys.stdout)


if __name__ == "__main__":
    main()
