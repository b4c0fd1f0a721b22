"""Graph files: .npz archives, edge-list text, .npy features; every unreadable file is one InputError."""

import io
import random
import re

import numpy as np
import pytest

from common.errors import InputError
from graph import load_graph_file, load_node_features_file, parse_edge_list, validate_graph

EDGES = np.array([[0, 1], [1, 2], [2, 3], [3, 0], [0, 2], [1, 3]], dtype=np.int64)


def test_npz_with_edges_features_and_state(tmp_path):
    path = tmp_path / "graph.npz"
    features = np.arange(8.0).reshape(4, 2)
    state = np.full((4, 2), 0.5)
    np.savez(path, edges=EDGES, node_features=features, state=state)
    arrays = load_graph_file(path)
    np.testing.assert_array_equal(arrays.edges, EDGES)
    np.testing.assert_array_equal(arrays.node_features, features)
    np.testing.assert_array_equal(arrays.state, state)


def test_compressed_npz_with_edges_only(tmp_path):
    path = tmp_path / "graph.NPZ"
    with open(path, "wb") as file:
        np.savez_compressed(file, edges=EDGES.astype(np.int32))
    arrays = load_graph_file(path)
    np.testing.assert_array_equal(arrays.edges, EDGES)
    assert arrays.node_features is None and arrays.state is None


def test_edge_list_text_with_spaces_commas_comments_and_blank_lines(tmp_path):
    path = tmp_path / "graph.txt"
    path.write_text("# source target\n0 1\n1,2\n\n  2\t3  # a comment\r\n3 ,0\n0, 2\n# 7 7\n1 3")
    np.testing.assert_array_equal(load_graph_file(path).edges, EDGES)


def test_edge_list_with_a_utf8_byte_order_mark_parses_and_bad_bytes_show_escaped_once():
    bom = b"\xef\xbb\xbf"
    np.testing.assert_array_equal(parse_edge_list(bom + b"0 1\n1 0\n"), [[0, 1], [1, 0]])
    np.testing.assert_array_equal(parse_edge_list(bom + b"# source target\n0,1\n"), [[0, 1]])
    with pytest.raises(InputError) as error:
        parse_edge_list(b"0 1\n1 " + bom + b"0\n", "--graph g.txt")  # a BOM inside the text is still wrong
    assert "line 2 (edge 1): '\\ufeff0' is not a node id" in str(error.value)


def test_edge_list_comment_at_start_of_line_and_hash_only_file():
    np.testing.assert_array_equal(parse_edge_list(b"#\n#x y z\n5 6\n"), [[5, 6]])
    np.testing.assert_array_equal(parse_edge_list(b"1 2 # 3 4\n#\n 5 6#7\n# 8\n\n11 12"), [[1, 2], [5, 6], [11, 12]])
    assert parse_edge_list(b"# nothing here\n").shape == (0, 2)
    assert parse_edge_list(b"").shape == (0, 2)


@pytest.mark.parametrize("block_bytes", [1, 7, 64])
def test_edge_lists_parse_in_blocks_of_whole_lines(block_bytes):
    text = b"# header\n1 2\n3 4 # x\n55555555555 6\n\n7,8\n" * 3
    whole = parse_edge_list(text)
    np.testing.assert_array_equal(parse_edge_list(text, block_bytes=block_bytes), whole)
    assert whole.shape == (12, 2)
    with pytest.raises(InputError, match="line 19 has 3 values"):
        parse_edge_list(text + b"1 2 3\n", block_bytes=block_bytes)
    with pytest.raises(InputError, match=re.escape("line 18 (edge 11): 'x9' is not a node id")):
        parse_edge_list(text[:-4] + b"x9 8\n", block_bytes=block_bytes)


@pytest.mark.parametrize(
    "text, message",
    [
        (b"0 1\n1 2 3\n", "line 2 has 3 values"),
        (b"0 1\n5\n", "line 2 has 1 value;"),  # one value, not "1 values"
        (b"source,target\n0,1\n", "line 1 (edge 0): 'source' is not a node id"),
        (b"0 1\n1 2.0\n", "line 2 (edge 1): '2.0' is not a node id"),
        (b"0 1\n1 \xff\n", "line 2 (edge 1): '\\xff' is not a node id"),
        (b"0 1\n1 99999999999999999999\n", "line 2 (edge 1): '99999999999999999999' is not a node id"),
    ],
)
def test_bad_edge_list_lines_are_named(tmp_path, text, message):
    path = tmp_path / "graph.edges"
    path.write_bytes(text)
    with pytest.raises(InputError) as error:
        load_graph_file(path)
    assert str(error.value).startswith(f"--graph {path}: ")
    assert message in str(error.value)


def test_edge_list_ids_out_of_range_are_found_by_validation(tmp_path):
    path = tmp_path / "graph.txt"
    path.write_text("0 1\n1 0\n1 -2\n")
    edges = load_graph_file(path).edges
    with pytest.raises(InputError, match=r"edge 2 \(1 -> -2\) has a negative node id"):
        validate_graph([1.0, 2.0], edges)


def _npy_bytes(array) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def _npz_bytes(**arrays) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("missing.npz", None, "file not found"),
        ("random.npz", b"\x00\x01 this is not a zip archive", "not a readable .npz archive: not a zip archive"),
        ("truncated.npz", _npz_bytes(edges=EDGES)[:100], "not a readable .npz archive: not a zip archive"),
        ("cut.npz", _npz_bytes(edges=np.arange(4000).reshape(-1, 2))[:-200], "not a readable .npz archive"),
        ("empty.npz", b"", "not a readable .npz archive"),
        ("single.npz", None, "holds a single array, not an .npz archive"),
        ("nameless.npz", _npz_bytes(node_features=np.ones(4)), "no 'edges' array (found: node_features)"),
        ("typo.npz", _npz_bytes(edges=EDGES, features=np.ones(4)), "unknown array 'features'"),
        ("objects.npz", _npz_bytes(edges=np.array([[0, 1]], dtype=object)), "holds an array of Python objects (pickled), which the sample never loads"),
        ("graph.npy", b"", "a .npy file holds a single array"),
    ],
)
def test_unreadable_graph_files_are_one_line_input_errors(tmp_path, name, content, message):
    path = tmp_path / name
    if name == "single.npz":
        with open(path, "wb") as file:
            np.save(file, EDGES)
    elif content is not None:
        path.write_bytes(content)
    with pytest.raises(InputError) as error:
        load_graph_file(path)
    assert message in str(error.value)
    assert_sample_words_only(str(error.value))


def test_a_directory_is_not_a_graph_file(tmp_path):
    with pytest.raises(InputError, match="not a regular file"):
        load_graph_file(tmp_path)


@pytest.mark.parametrize(
    "edges, message",
    [
        (EDGES.astype(np.float32), "node ids must be integers, got an array of dtype float32"),
        (EDGES.reshape(3, 4), "expected shape [E, 2] (source, target), got shape [3, 4]"),
        (EDGES.astype(bool), "got an array of dtype bool"),
    ],
)
def test_npz_with_wrong_edge_dtype_or_shape_fails_validation(tmp_path, edges, message):
    path = tmp_path / "graph.npz"
    np.savez(path, edges=edges, node_features=np.ones(4))
    arrays = load_graph_file(path)
    with pytest.raises(InputError) as error:
        validate_graph(arrays.node_features, arrays.edges, arrays.state)
    assert message in str(error.value)


def test_corrupted_archives_load_or_raise_input_error_never_anything_else(tmp_path):
    """Truncations and overwritten bytes at seeded random places (the corruptions zip and npy readers meet)."""
    originals = []
    for save in (np.savez, np.savez_compressed):
        buffer = io.BytesIO()
        save(buffer, edges=EDGES, node_features=np.arange(4.0))
        originals.append(buffer.getvalue())
    rng = random.Random(1234)
    path = tmp_path / "corrupt.npz"
    outcomes = {"loaded": 0, "refused": 0}
    for trial in range(300):
        data = bytearray(originals[trial % 2])
        if trial % 3 == 0:
            data = data[: rng.randrange(len(data))]
        else:
            for _ in range(rng.randrange(1, 6)):
                data[rng.randrange(len(data))] = rng.randrange(256)
        path.write_bytes(bytes(data))
        try:
            arrays = load_graph_file(path)
        except InputError as error:
            assert "\n" not in str(error)
            outcomes["refused"] += 1
            continue
        outcomes["loaded"] += 1
        try:
            validate_graph(arrays.node_features if arrays.node_features is not None else np.ones(4), arrays.edges)
        except InputError:
            pass
    assert outcomes["refused"] > 100 and outcomes["loaded"] > 0


def test_node_features_file(tmp_path):
    path = tmp_path / "features.npy"
    np.save(path, np.arange(6.0).reshape(3, 2))
    np.testing.assert_array_equal(load_node_features_file(path), np.arange(6.0).reshape(3, 2))


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("missing.npy", None, "--node_features_file {path}: file not found"),
        ("garbage.npy", b"\x93NUMPY garbage", "not a readable .npy file: the file is damaged or not in NumPy's format"),
        ("truncated.npy", _npy_bytes(np.arange(100.0))[:150], "not a readable .npy file: the file is truncated or damaged"),
        ("not_numpy.npy", b"plain text, not numpy", "not a readable .npy file: not in NumPy's format"),
        ("long_header.npy", b"\x93NUMPY\x01\x00\x40\x00{'descr': '<f8', 'fortran_order': False, 'shape': (3,), 'x': 1}\n",
         "not a readable .npy file: the file is damaged or not in NumPy's format"),
        ("archive.npz", _npz_bytes(node_features=np.ones(3)), "an .npz archive; expected a .npy file"),
        ("unclosed_header.npy", b"\x93NUMPY\x01\x00\x20\x00{'descr': '<f8', 'shape': (3,\n", "the file is truncated or damaged"),
        ("unterminated_header.npy", b"\x93NUMPY\x01\x00\x0f\x00{'descr': '<f8\n", "the file is truncated or damaged"),
        ("pickled.npy", None, "not a readable .npy file: it holds an array of Python objects (pickled), which the sample never loads"),
    ],
)
def test_unreadable_node_features_files(tmp_path, name, content, message):
    path = tmp_path / name
    if name == "pickled.npy":
        np.save(path, np.array([1.0, "x"], dtype=object), allow_pickle=True)
    elif content is not None:
        path.write_bytes(content)
    with pytest.raises(InputError) as error:
        load_node_features_file(path)
    assert message.format(path=path) in str(error.value)
    assert_sample_words_only(str(error.value))


@pytest.mark.parametrize("error", [
    ("EOF in multi-line statement", (2, 0)),  # Python 3.10 and 3.11, for both headers above
    ("unexpected EOF in multi-line statement", (1, 0)),  # 3.12 and 3.13, the unclosed header
    ("unterminated string literal (detected at line 1)", (1, 11)),  # 3.12 and 3.13, the unterminated one
])
def test_a_header_the_tokenizer_cannot_end_is_truncated_or_damaged_in_every_python(error):
    """numpy reads a version 1.0 .npy header that literal_eval refuses through tokenize, whose TokenError is worded
    by Python's version (each as its interpreter raises it): the same specific words in each."""
    import tokenize

    from graph.files import why_unreadable

    assert why_unreadable(tokenize.TokenError(*error)) == "the file is truncated or damaged"


def assert_sample_words_only(message: str) -> None:
    """One line in the sample's words: no numpy advice the user cannot follow, nothing cut off mid-word."""
    assert "\n" not in message and "allow_pickle" not in message and "Error" not in message
    assert not message.endswith("...")
