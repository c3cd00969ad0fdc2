"""Expert and tensor parallelism over real MPI processes (Engram tables shared per host): `mpirun -np N deepinfer generate --tp/--ep` gives
the same greedy tokens as one rank and teacher-forced logits within tolerance (partial sums are added in
another order), and a bad split is refused on every rank with a clear error instead of a hang."""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

BIN = os.environ["DEEPINFER_BIN"]
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
PROMPT = "17,230,45,600,12,98,400,3,77,512,640,31,200,150,900,44,19,301,222,5,66,87,808,123,456,700,8,11,13,14"
TEACHER = "50,60,70,80,90,100,110,120"


def run(ranks, args):
    cmd = [BIN, "generate", "--threads", "1", "--prompt-ids", PROMPT] + args
    if ranks > 1:
        cmd = ["mpirun", "--oversubscribe", "--bind-to", "none", "-np", str(ranks)] + cmd
    return subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=600)


def outputs(ranks, split, tmp, tag):
    logits = os.path.join(tmp, tag + ".npy")
    forced = run(ranks, split + ["--teacher-ids", TEACHER, "--dump-logits", logits])
    if forced.returncode != 0:
        sys.exit(f"{tag}: teacher forcing failed ({forced.returncode}):\n{forced.stderr[-3000:]}")
    free = run(ranks, split + ["--max-tokens", "16", "--temperature", "0", "--ignore-eos", "--json"])
    if free.returncode != 0:
        sys.exit(f"{tag}: greedy run failed ({free.returncode}):\n{free.stderr[-3000:]}")
    return np.load(logits), json.loads(free.stdout.strip().splitlines()[-1])["output_ids"]


def cosine(a, b):
    return float((a * b).sum() / np.sqrt((a * a).sum() * (b * b).sum()))


def main():
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        ref_logits, ref_tokens = outputs(1, [], tmp, "single")
        for ranks, split in [(2, ["--tp", "2"]), (2, ["--ep", "2"]), (2, ["--tp", "2", "--ep", "2"]),
                             (4, ["--ep", "4"]), (4, ["--tp", "2", "--ep", "4"])]:
            tag = f"np{ranks}_" + "_".join(split).replace("--", "")
            logits, tokens = outputs(ranks, split, tmp, tag)
            worst = min(cosine(ref_logits[i], logits[i]) for i in range(len(ref_logits)))
            top1 = int((ref_logits.argmax(1) == logits.argmax(1)).sum())
            print(f"{tag}: worst cosine {worst:.6f}, top-1 {top1}/{len(ref_logits)}, greedy equal {tokens == ref_tokens}")
            if worst < 0.999 or top1 != len(ref_logits) or tokens != ref_tokens:
                failures.append(tag)
        # The Engram tables went through one shared-memory segment per host; none may be left behind.
        left = [f for f in os.listdir("/dev/shm") if f.startswith("deepinfer-")]
        if left:
            failures.append("shared memory left behind: " + ", ".join(left))
        bad = run(2, ["--tp", "3", "--max-tokens", "2"])
        if bad.returncode == 0 or "--tp 3" not in bad.stderr:
            failures.append("bad split not refused: " + bad.stderr[-500:])
    if failures:
        sys.exit("failed: " + ", ".join(failures))


if __name__ == "__main__":
    main()
