from rlhealth.cli import run

run()
