"""Job scripts for the Slurm integration tests: a fake SkyRL trainer (python3, so the probe finds a
python process under the job's slurmstepd) printing realistic bring-up and step lines
(marin-artifacts §5.4, log-formats §8.1), then sleeping or crashing with a traceback."""
from __future__ import annotations

FAKE_TRAINER = r'''
import sys, time
mode = sys.argv[1]
def log(level, where, msg):
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S')}.000 | {level:<8} | {where} - {msg}", flush=True)
print("[rl-slurm] MarinSkyRL now at 3f2a9c1", flush=True)
print("Ray nodes alive: 1/1", flush=True)
log("INFO", "skyrl.train.trainer:train:210", "InferenceEngineClient initialized with 1 engines")
log("INFO", "skyrl.train.trainer:train:244", "Resumed training from global_step 0")
if mode == "bringup":
    # a leg that is still loading (no training step yet); it would crash like its predecessors
    log("INFO", "skyrl.train.trainer:train:230", "Loading policy weights (FSDP) 5%")
    time.sleep(600)
    mode = "crash"
if mode == "crash":
    # the deterministic bring-up failure of marin-artifacts §5.4 rung 4
    print("Traceback (most recent call last):", file=sys.stderr, flush=True)
    print('  File "/opt/skyrl/skyrl/train/model_wrapper.py", line 88, in load_model', file=sys.stderr)
    print("    experts = config.norm_topk_prob", file=sys.stderr)
    print("AttributeError: 'Qwen3MoeConfig' object has no attribute 'norm_topk_prob'", file=sys.stderr, flush=True)
    sys.exit(1)
for step in range(1, 100000):
    # the console logger's pprint'ed record (log-formats §8.1): quoted floats, sorted keys
    log("INFO", "skyrl.train.utils.tracking:log:189", f"Step {step}: ")
    print("{'generate/avg_num_tokens': '1843.2500',")
    print(" 'policy/grad_norm': '0.4100',")
    print(" 'policy/policy_entropy': '0.6512',")
    print(" 'policy/policy_loss': '-0.0121',")
    print(f" 'reward/avg_pass_at_8': '{0.30 + step * 0.001:.4f}',")
    print(f" 'reward/avg_raw_reward': '{0.10 + step * 0.001:.4f}',")
    print(f" 'trainer/global_step': {step}}}", flush=True)
    time.sleep(5)
'''


def trainer_script(mode: str, exp_dir) -> str:
    """Batch script body: run the fake trainer in ``mode`` (``crash``, ``bringup`` or ``healthy``). sbatch copies
    the script into the spool, so the trainer is addressed by the experiment directory."""
    return ("set -u\n"
            "echo \"job $SLURM_JOB_ID on $(hostname) leg start\"\n"
            f"python3 -u {exp_dir}/fake_trainer.py {mode}\n")
