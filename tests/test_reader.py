"""reader.py: line numbering, BOM/CRLF/blank handling, streaming, and every decode failure's message."""

from __future__ import annotations

import io

import pytest

from ctxcompact.errors import LineError
from ctxcompact.reader import decode_line, iter_lines


def lines_of(data: bytes) -> list[tuple[int, bytes]]:
    return list(iter_lines(io.BytesIO(data)))


class TestIterLines:
    def test_numbers_count_blank_lines(self) -> None:
        data = b'{"a":1}\n\n   \n{"b":2}\n\t\n{"c":3}'
        assert lines_of(data) == [(1, b'{"a":1}'), (4, b'{"b":2}'), (6, b'{"c":3}')]

    def test_crlf_and_lf_endings_are_removed(self) -> None:
        assert lines_of(b'{"a":1}\r\n{"b":2}\n{"c":3}\r\n') == [
            (1, b'{"a":1}'),
            (2, b'{"b":2}'),
            (3, b'{"c":3}'),
        ]

    def test_a_carriage_return_inside_a_line_is_kept(self) -> None:
        # only a \r directly before \n is a line ending
        assert lines_of(b'{"a":"x\ry"}\n') == [(1, b'{"a":"x\ry"}')]

    def test_bom_is_stripped_on_line_one_only(self) -> None:
        bom = b"\xef\xbb\xbf"
        assert lines_of(bom + b'{"a":1}\n' + bom + b'{"b":2}\n') == [(1, b'{"a":1}'), (2, bom + b'{"b":2}')]

    def test_bom_alone_then_blank(self) -> None:
        assert lines_of(b"\xef\xbb\xbf\n\n") == []

    def test_empty_and_blank_only_inputs_yield_nothing(self) -> None:
        assert lines_of(b"") == []
        assert lines_of(b"\n \n\r\n\t\n") == []

    def test_streams_line_by_line(self) -> None:
        class NoBulkRead(io.BytesIO):
            def read(self, size: int | None = -1) -> bytes:  # a whole-file read would fail the test
                raise AssertionError("read() called: the reader must stream by lines")

        stream = NoBulkRead(b'{"a":1}\n' * 1000)
        it = iter_lines(stream)
        assert next(it) == (1, b'{"a":1}')
        # after the first line only that line has been consumed
        assert stream.tell() == len(b'{"a":1}\n')
        assert sum(1 for _ in it) == 999


class TestDecodeLine:
    def message(self, raw: bytes) -> str:
        with pytest.raises(LineError) as exc:
            decode_line(raw, 7)
        assert exc.value.path == "$"
        return exc.value.message

    def test_object_decodes(self) -> None:
        assert decode_line(b'{"role": "user", "content": "h\xc3\xa9"}', 1) == {
            "role": "user",
            "content": "hé",
        }

    def test_truncated(self) -> None:
        msg = self.message(b'{"role": "user", "content": "hel')
        assert "truncated JSON" in msg

    @pytest.mark.parametrize(
        ("raw", "kind"),
        [
            (b"[1, 2]", "array"),
            (b'"text"', "string"),
            (b"3.5", "number"),
            (b"null", "null"),
            (b"true", "boolean"),
        ],
    )
    def test_non_object(self, raw: bytes, kind: str) -> None:
        assert f"expected a JSON object, got {kind}" in self.message(raw)

    def test_invalid_utf8_names_the_byte(self) -> None:
        # b'{"a": "caf' is 10 bytes, so the Latin-1 \xe9 is byte 11
        msg = self.message(b'{"a": "caf\xe9"}')
        assert "invalid UTF-8" in msg and "byte 11" in msg

    @pytest.mark.parametrize(
        ("raw", "word", "col"),
        [
            (b'{"a": NaN}', "NaN", 7),
            (b'{"a": Infinity}', "Infinity", 7),
            (b'{"a": -Infinity}', "-Infinity", 7),
        ],
    )
    def test_nan_and_infinity(self, raw: bytes, word: str, col: int) -> None:
        msg = self.message(raw)
        assert msg.startswith(f"{word} at column {col}")
        assert "NaN and Infinity are not allowed" in msg

    def test_nan_column_counts_characters_not_bytes(self) -> None:
        # "é€" are 2 characters but 5 bytes: the column counts characters (N is character 16)
        raw = '{"é€": 1, "x": NaN}'.encode()
        assert self.message(raw).startswith("NaN at column 16")

    def test_trailing_garbage(self) -> None:
        msg = self.message(b'{"a": 1} {"b": 2}')
        assert "trailing data at column 10" in msg

    def test_deep_nesting_is_an_error_not_a_crash(self) -> None:
        raw = b"[" * 10_000 + b"]" * 10_000
        msg = self.message(raw)
        assert "nesting too deep" in msg and "1024" in msg

    def test_nesting_within_the_limit_decodes(self) -> None:
        value = decode_line(b'{"a":' + b"[" * 500 + b"]" * 500 + b"}", 1)
        depth = 0
        node = value["a"]
        while node:
            node = node[0]
            depth += 1
        assert depth == 499  # 500 arrays, the innermost empty

    def test_other_syntax_errors_name_the_column(self) -> None:
        msg = self.message(b'{"a": 1,}')
        # the offending comma is the 8th character
        assert msg.startswith("invalid JSON at column 8") and "trailing comma" in msg
