import pytest

from core.loading import DEFAULT_DRAFT, DEFAULT_TARGET, load_model
from core.prompts import ASSET_PROMPTS, read_prompts


@pytest.fixture(scope="session")
def target():
    return load_model(DEFAULT_TARGET, "cpu")


@pytest.fixture(scope="session")
def draft():
    return load_model(DEFAULT_DRAFT, "cpu")


@pytest.fixture(scope="session")
def heldout_prompts():
    return [r["prompt"] for r in read_prompts(ASSET_PROMPTS)]
