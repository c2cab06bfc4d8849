import numpy as np
import pytest
from Bio.Seq import Seq

from genobird.errors import SequenceError
from genobird.genome import (
    acgt_to_deepsea_order,
    deepsea_to_acgt_order,
    normalise_dna,
    one_hot,
    one_hot_to_sequence,
    reverse_complement,
)


def test_normalise_uppercases_turns_u_into_t_and_iupac_into_n():
    assert normalise_dna("acgtU") == "ACGTT"
    assert normalise_dna("ARYSWKMBDHVNryswkmbdhvn") == "A" + "N" * 22


@pytest.mark.parametrize("bad, position", [("ACGX", 3), ("AC-GT", 2), ("A CGT", 1), ("ACGé", 3)])
def test_normalise_names_record_and_zero_based_position(bad, position):
    with pytest.raises(SequenceError, match=rf"rec1: .* at 0-based position {position + 10}"):
        normalise_dna(bad, record="rec1", offset=10)


def test_sequence_error_is_a_value_error():
    with pytest.raises(ValueError):
        normalise_dna("ACGZ")


def test_reverse_complement_matches_biopython_including_iupac_and_case():
    rng = np.random.default_rng(0)
    letters = np.array(list("ACGTNacgtnRYSWKMBDHV"))
    for _ in range(50):
        sequence = "".join(rng.choice(letters, size=int(rng.integers(0, 300))))
        assert reverse_complement(sequence) == str(Seq(sequence).reverse_complement())


def test_one_hot_channels_are_acgt_and_n_is_all_zero():
    encoded = one_hot("ACGTN")
    assert encoded.shape == (5, 4)
    np.testing.assert_array_equal(encoded[:4], np.eye(4))
    assert encoded[4].sum() == 0
    assert one_hot_to_sequence(encoded) == "ACGTN"


def test_deepsea_order_swaps_c_and_g_both_ways():
    encoded = one_hot("ACGT")
    deepsea = acgt_to_deepsea_order(encoded)
    assert one_hot_to_sequence(deepsea, order="AGCT") == "ACGT"
    np.testing.assert_array_equal(deepsea[1], [0, 0, 1, 0])  # C is channel 2 in A,G,C,T
    np.testing.assert_array_equal(deepsea_to_acgt_order(deepsea), encoded)
    # DeepSEA stores [4, L]: the channel axis can be chosen
    np.testing.assert_array_equal(acgt_to_deepsea_order(encoded.T, axis=0), deepsea.T)


def test_one_hot_to_sequence_rejects_two_hot_positions():
    encoded = one_hot("AC")
    encoded[1, 0] = 1
    with pytest.raises(SequenceError, match="position 1"):
        one_hot_to_sequence(encoded)
