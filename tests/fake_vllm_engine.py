"""A stand-in for vLLM's engine inside `specbench.backends.vllm_worker` (no vLLM needed).

The worker loads it with SPECBENCH_VLLM_WORKER_ENGINE=tests.fake_vllm_engine:FakeEngine. It
answers like `VLLMEngine`: deterministic tokens (prompt's last id + 1, + 2, ...), and, with a
speculative config of γ tokens, steps that accept ``(step % (γ + 1))`` drafts, with counters that
agree with the per-request figures. It prints to stdout on purpose: the worker must keep the
protocol channel clean. Environment knobs: FAKE_VLLM_DIE_ON=<method> exits the process when a
batch runs with that speculative method (a worker dying mid-sweep); FAKE_VLLM_FAIL_START=1
raises in the constructor.
"""

from __future__ import annotations

import os


class FakeEngine:
    version = "fake-0"

    def __init__(self, model: str, engine: dict, speculative_config: dict | None):
        print("fake vLLM engine starting (this line must not reach the protocol)", flush=True)
        if os.environ.get("FAKE_VLLM_FAIL_START"):
            raise ValueError("fake engine refused to start\nsecond line")
        self.model, self.engine, self.spec = model, engine, speculative_config
        self.gamma = int((speculative_config or {}).get("num_speculative_tokens", 0))
        self.calls = 0
        self.totals = {"drafts": 0, "draft_tokens": 0, "accepted": 0, "per_pos": [0] * self.gamma}

    def counters(self) -> dict:
        if not self.spec:
            return {"vllm:generation_tokens": 0}
        t = self.totals
        return {
            "vllm:spec_decode_num_drafts": t["drafts"],
            "vllm:spec_decode_num_draft_tokens": t["draft_tokens"],
            "vllm:spec_decode_num_accepted_tokens": t["accepted"],
            "vllm:spec_decode_num_accepted_tokens_per_pos": list(t["per_pos"]),
        }

    def generate(self, requests: list[dict], concurrency: int) -> list[dict]:
        self.calls += 1
        if self.spec and os.environ.get("FAKE_VLLM_DIE_ON") == self.spec.get("method") and self.calls > 1:
            os._exit(3)  # after the warm-up: in the middle of a measured batch
        outputs = []
        for r in requests:
            n = int(r["max_tokens"])
            last = int(r["prompt_token_ids"][-1]) if r["prompt_token_ids"] else 0
            tokens = [(last + i + 1) % 1000 for i in range(n)]
            times, counts, accepted_steps, drafted_steps = [0.01], [1], [], []
            left, step = n - 1, 0
            while left > 0:
                if self.gamma:
                    a = step % (self.gamma + 1)
                    accepted_steps.append(a)
                    drafted_steps.append(self.gamma)
                    self.totals["drafts"] += 1
                    self.totals["draft_tokens"] += self.gamma
                    self.totals["accepted"] += a
                    for i in range(a):
                        self.totals["per_pos"][i] += 1
                    got = min(a + 1, left)
                else:
                    got = 1
                left -= got
                step += 1
                times.append(times[-1] + 0.01)
                counts.append(got)
            spec = None
            if self.gamma:
                spec = {
                    "num_spec_steps": len(accepted_steps),
                    "num_draft_tokens": sum(drafted_steps),
                    "num_accepted_draft_tokens": sum(accepted_steps),
                    "num_spec_tokens": self.gamma,
                    "per_step_accepted": accepted_steps,
                    "per_step_drafted": drafted_steps,
                }
            arrival = float(r.get("arrival_s") or 0.0)
            outputs.append(
                {
                    "token_ids": tokens,
                    "finish_reason": "length",
                    "spec": spec,
                    "submit_s": arrival,
                    "arrival_s": arrival,
                    "token_times_s": times,
                    "token_counts": counts,
                }
            )
        return outputs
