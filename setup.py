"""verl-ext: off-policy REINFORCE-family algorithms, controlled staleness and a CPU backend for verl 0.9.1."""

from pathlib import Path

from setuptools import find_packages, setup

VERL = "verl==0.9.1"

# What every install needs at run time (the data tools and reward functions included).
RUNTIME = [
    VERL,
    "hydra-core>=1.3",
    "omegaconf>=2.3",
    "datasets>=2.19",
    "pyarrow>=14",
    "math-verify>=0.7",
    "tqdm>=4.60",
    "rich>=13",
    "matplotlib>=3.7",
    "wrapt>=1.14",
    "psutil>=5.9",
]

# A CPU-only machine: verl's CPU extra pulls the trainer's imports (TransferQueue, uvicorn, cachetools, ...).
TEST = [
    "verl[cpu]==0.9.1",
    "pytest>=8",
    "pytest-timeout>=2.1",  # pytest.ini's per-test time limit: a hang fails with a traceback instead of stalling CI
    "pytest-xdist>=3.5",  # run_scripts/test.sh's two test processes (tests/conftest.py: the e2e runs made once)
    "hypothesis>=6.100",
    "wheel>=0.40",  # tests/test_packaging.py builds a real wheel offline (--no-build-isolation)
]

# A GPU node: verl's vLLM rollout and FSDP training extras.
GPU = ["verl[vllm,fsdp]==0.9.1"]

setup(
    name="verl-ext",
    version="0.1.0",
    description=__doc__,
    long_description=Path(__file__).with_name("README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    python_requires=">=3.10,<3.13",
    # Top-level names an install writes: verl_ext and data_prep only (a test checks they collide with no
    # installed distribution). The recipe config ships as verl_ext/recipe/rec_trainer.yaml; the checkout's
    # recipe/rec/config/rec_trainer.yaml is a symlink to it, not a package.
    packages=find_packages(include=["verl_ext", "verl_ext.*", "data_prep", "data_prep.*"]),
    package_data={"verl_ext": ["**/*.yaml", "**/*.json"], "verl_ext.recipe": ["*.yaml"]},
    include_package_data=True,
    install_requires=RUNTIME,
    extras_require={"test": TEST, "cpu": TEST, "gpu": GPU},
    entry_points={
        "verl.plugins": ["verl_ext = verl_ext.plugin"],
        "console_scripts": ["verl-ext = verl_ext.cli:main"],
    },
)
