"""Graph properties of a layout: Yun et al. 2020's Assumption 1 and BigBird's star graph.

The attention graph has an edge key j -> query i when block i attends block j. Yun et
al. ("O(n) Connections are Expressive Enough", Assumption 1) ask that (1) every token
attends to itself, (2) a Hamiltonian path of direct connections exists: an order
g_1..g_n with g_i attended by g_{i+1}, and (3) every token reaches every token within s
hops. BigBird's Theorem 1 needs a star graph: one node that attends to all and is
attended by all. Properties are checked on the block graph (tokens of one block share
their row), for every head; a layout satisfies one only if all its heads do.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from genobird.attention.layouts import BlockLayout

HAMILTONIAN_SEARCH_BUDGET = 200_000  # DFS steps before answering "unknown"


@dataclass(frozen=True)
class LayoutReport:
    self_attention: bool
    hamiltonian_path: bool | None  # None: not decided within the search budget
    hops_to_all: int | None  # s; None when some block never reaches another
    has_star: bool

    @property
    def satisfies_assumption_1(self) -> bool | None:
        if not self.self_attention or self.hops_to_all is None:
            return False
        return self.hamiltonian_path

    def summary(self) -> str:
        return (
            f"self-attention {self.self_attention}, Hamiltonian path {self.hamiltonian_path}, "
            f"all reached within {self.hops_to_all} hops, star graph {self.has_star}, "
            f"Assumption 1 {self.satisfies_assumption_1}"
        )


def hops_to_all(mask: torch.Tensor) -> int | None:
    """Smallest s such that every block reaches every block in at most s hops, for one
    head's block mask [NB, NB] (self-loops count as staying put)."""
    nb = mask.shape[0]
    step = (mask | torch.eye(nb, dtype=torch.bool)).float()
    reach = step.clone()
    for hops in range(1, nb + 1):
        if bool((reach > 0).all()):
            return hops
        reach = ((reach @ step) > 0).float()
    return None


def hamiltonian_path(mask: torch.Tensor, budget: int = HAMILTONIAN_SEARCH_BUDGET) -> bool | None:
    """Whether an order g_1..g_n exists with mask[g_{i+1}, g_i] True for all i."""
    nb = mask.shape[0]
    attended_by = [set(torch.nonzero(mask[:, j]).flatten().tolist()) - {j} for j in range(nb)]
    for order in (range(nb), range(nb - 1, -1, -1)):  # sequence order covers windowed layouts
        steps = list(order)
        if all(steps[i + 1] in attended_by[steps[i]] for i in range(nb - 1)):
            return True
    steps_left = [budget]

    def extend(path: list[int], seen: set[int]) -> bool | None:
        if len(path) == nb:
            return True
        steps_left[0] -= 1
        if steps_left[0] < 0:
            return None
        # Warnsdorff: try the successor with the fewest onward options first.
        nxt = sorted(attended_by[path[-1]] - seen, key=lambda n: len(attended_by[n] - seen))
        undecided = False
        for node in nxt:
            result = extend([*path, node], seen | {node})
            if result:
                return True
            undecided |= result is None
        return None if undecided else False

    outcomes = [extend([start], {start}) for start in range(nb)]
    if any(outcomes):
        return True
    return None if any(o is None for o in outcomes) else False


def has_star(mask: torch.Tensor) -> bool:
    """Some block attends all blocks and is attended by all (BigBird Theorem 1)."""
    return bool((mask.all(dim=1) & mask.all(dim=0)).any())


def analyse_layout(layout: BlockLayout) -> LayoutReport:
    masks = list(layout.block_mask.cpu())
    paths = [hamiltonian_path(m) for m in masks]
    hops = [hops_to_all(m) for m in masks]
    path = False if False in paths else (None if None in paths else True)
    return LayoutReport(
        self_attention=bool(all(m.diagonal().all() for m in masks)),
        hamiltonian_path=path,
        hops_to_all=None if None in hops else max(hops),
        has_star=all(has_star(m) for m in masks),
    )
