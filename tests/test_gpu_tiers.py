"""Every choice the course makes per GPU, on faked GPUs: a T4 (7.5), an A100 (8.0), an H200
(9.0), a B200 (10.0) and an RTX 5090 (12.0). The course reads the GPU through
tmm_course.gpu.current(); faking it (and the backend) exercises the GPU branches on a machine
without one, without launching anything."""

from __future__ import annotations

import pytest
import torch

import tmm_course
from tmm_course import gpu, gpus, validate
from tmm_course.backend import GPU
from tmm_course.capstone import kernels, matmul_fast, plans
from tmm_course.capstone.problems import GOALS


@pytest.fixture(params=["T4", "A100", "H200", "B200", "RTX 5090"])
def card(request, monkeypatch) -> gpu.Gpu:
    fake = gpu.KNOWN[request.param]
    monkeypatch.setattr(tmm_course, "BACKEND", GPU)
    monkeypatch.setattr(gpu, "current", lambda: fake)
    return fake


def operands(m: int, n: int, k: int, dtype: torch.dtype = torch.float16):
    return torch.empty(m, k, dtype=dtype), torch.empty(k, n, dtype=dtype)


def test_five_tiers_by_capability_and_none_assumes_newer_means_more_shared_memory():
    cards = ("T4", "A100", "H200", "B200", "RTX 5090")
    assert [gpu.KNOWN[k].tier for k in cards] == [
        "before Ampere",
        "Ampere or Ada",
        "Hopper",
        "Blackwell",
        "consumer Blackwell",
    ]
    assert set(gpus.TIERS) == {gpu.KNOWN[k].tier for k in cards}
    # the newest capability has less shared memory per program than an A100 (8.0)
    assert gpu.KNOWN["RTX 5090"].shared_memory < gpu.KNOWN["A100"].shared_memory
    assert gpu.KNOWN["RTX 5090"].tma and gpu.KNOWN["B200"].tma
    said = " ".join(gpu.KNOWN["RTX 5090"].skipped())
    assert "mma.sync" in said and "99 KB" in said


def test_a_t4_leaves_out_bfloat16_tf32_pipelining_and_tma():
    skipped = " ".join(gpu.KNOWN["T4"].skipped())
    for feature in ("bfloat16", "TF32", "pipelining", "TMA"):
        assert feature in skipped
    assert gpu.KNOWN["H200"].skipped() == []


def test_tf32_runs_as_exact_float32_where_there_is_none(card):
    assert gpu.precision_for("tf32") == ("tf32" if card.tf32 else "ieee")
    assert gpu.precision_for("ieee") == "ieee"


def test_bfloat16_is_refused_in_plain_words_before_ampere(card):
    a = torch.empty(4, 4, dtype=torch.bfloat16)
    if card.bfloat16:
        validate.dtype("a", a, [torch.bfloat16], GPU)
    else:
        said = r"compute capability 8\.0 \(Ampere\) or newer"
        with pytest.raises(validate.KernelInputError, match=said):
            validate.dtype("a", a, [torch.bfloat16], GPU)


def test_the_tma_kernel_runs_only_on_hopper(card):
    a, b = operands(256, 256, 256)
    assert (kernels.tma_problem(a, b) is None) == card.tma
    assert (kernels.tma_problem(a, b, stage=True) is None) == card.tma  # copies cannot help


def test_unaligned_rows_are_staged_on_hopper_and_the_grouped_kernel_runs_elsewhere(card):
    a, b = operands(4096, 4096, 4093)
    chosen = plans.plan(a, b)
    if chosen.path == "persistent_tma":
        assert card.tma and chosen.stage
    if not card.tma:
        with pytest.raises(validate.KernelInputError, match=r"cannot run here: TMA needs"):
            matmul_fast(a, b, path="persistent_tma")  # refused before any launch


@pytest.mark.parametrize(("problem", "target"), GOALS, ids=[p.label for p, _ in GOALS])
def test_every_plan_exists_on_the_gpu_and_fits_its_shared_memory(card, problem, target):
    dtype = getattr(torch, problem.dtype)
    if dtype == torch.bfloat16 and not card.bfloat16:
        pytest.skip("bfloat16 is refused on this GPU (tested above)")
    a, b = operands(problem.m, problem.n, problem.k, dtype)
    chosen = plans.plan(a, b)
    assert chosen.path in plans.PATHS
    assert chosen.path != "persistent_tma" or card.tma
    used = plans.shared_memory_bytes(chosen.path, chosen.config, a.element_size(), card)
    assert used <= card.shared_memory, chosen
    if not card.pipelining:
        assert chosen.config.num_stages == 1


def test_the_h200_runs_a_configuration_its_fit_timed_and_the_rules_without_one(use_fit, card):
    if card is not gpu.KNOWN["H200"]:
        pytest.skip("the H200's plans are the ones its fit measured")
    a, b = operands(4096, 4096, 4096)
    fitted = next(f for f in plans.fit_table() if f.problem.label == "4096^3 float16")
    chosen = plans.plan(a, b)
    assert (chosen.path, chosen.config) in fitted.measured()  # timed on it
    assert "fitted on 4096^3 float16" in chosen.reason
    use_fit([])  # a package without a fit: the rules decide
    assert plans.plan(a, b).config == plans.LARGE_TMA


def test_a_config_is_shrunk_until_its_tiles_fit():
    t4, a100 = gpu.KNOWN["T4"], gpu.KNOWN["A100"]
    big = plans.LARGE_GROUPED  # 128x256x64, 4 stages: 196 KB of float16 tiles
    assert plans.shared_memory_bytes("grouped", big, 2) == 4 * (128 + 256) * 64 * 2
    assert plans.fit_shared_memory("grouped", big, 2, t4).num_stages == 1  # nothing to pipeline
    on_a100 = plans.fit_shared_memory("grouped", big, 2, a100)
    assert on_a100.num_stages == 3
    assert plans.shared_memory_bytes("grouped", on_a100, 2) <= 163 * 1024
