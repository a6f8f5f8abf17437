"""gpulab.cluster.input_problems: values that would leave their Key=Value, line or quotes."""

from __future__ import annotations

import pytest
from ansible_collections.gpulab.cluster.plugins.filter.input_problems import (
    FilterModule,
    input_problems,
)

# A made-up ASCII-armored key block: armor header, empty line, base64, checksum.
KEY = (
    "-----BEGIN PGP PUBLIC KEY BLOCK-----\nComment: site mirror\n\nbWFkZS11cA==\n=abcd\n"
    "-----END PGP PUBLIC KEY BLOCK-----"
)


@pytest.mark.parametrize(
    ("kind", "good", "bad"),
    [
        ("name", ["h100", "orin-nx", "vulkan1.4", "c++"],
         ["a b", "gpu\nSlurmUser=root", "x=y", "", "-a"]),
        ("key", ["MaxNodes", "DefMemPerCPU"], ["Max Nodes", "A=B", "1x", "a\nb"]),
        ("word", ["CR_Core_Memory", "a,b"], ["a b", "x=y", 'a"b', "a#b", "a\\b", "a\nb"]),
        ("value", ["FORCE:4", "CPU=1.0,Mem=0.25G"], ["1 AuthType=auth/none", "a\nb", 'a"', "a#"]),
        ("path", ["/srv/gpulab", "/dev/nvidia0", "/dev/nvgpu/igpu0/ctrl"],
         ["srv", "/srv/a b", '/srv/x"', "/srv/x\n/", "/srv/../etc", "/srv/x(rw)", "/a,b"]),
        ("slurm_time",
         ["INFINITE", "UNLIMITED", "30", "5:00", "1:00:00", "2-0", "2-12:00", "2-12:00:00"],
         ["1 day", "1h", "30\nSlurmUser=root", "-1", "1:2:3:4"]),
        ("cpu_list", ["0-15", "0,2,4-7"], ["0-15 x", "a", "0-"]),
        ("host", ["storage1", "10.0.0.1", "node-1.example.org", "fe80::1"],
         ["a b", "x;y", "a\nb", ""]),
        ("gecos", ["gpulab jobs", ""], ["a:b", "a\nb"]),
        ("text", ["--num-threads 2", ""], ['a"b', "a\nb", "$(id)", "`id`", "a\\b"]),
        ("file_name", ["site-debian", "local_repo.2"], ["a b", "a/b", "a+b", ".hidden", "a\nb"]),
        ("uri", ["http://mirror.example.org/debian", "file:/srv/repo", "mirror+file:/etc/m",
                 "http://[fe80::1]:3142/debian"],
         ["/srv/repo", "http://a b", "http://a\nSuites: x", "http://a#b", 'file:/a"']),
        ("http_url", ["http://proxy.example.org:3142", "https://10.0.0.1:3128/"],
         ['http://a";\nAcquire::x "y', "ftp://a", "http://a b", "http://a;b", "http://a}"]),
        ("signed_by", ["/usr/share/keyrings/site.gpg", KEY, KEY + "\n"],
         ["site.gpg", "/a b", "/etc/../x", "/k.gpg\nTrusted: yes", KEY + "\nTrusted: yes",
          KEY.replace("\n=", "\n\x1b")]),
    ],
)  # fmt: skip
def test_each_kind_takes_what_fits_and_names_what_does_not(
    kind: str, good: list[str], bad: list[str]
) -> None:
    assert input_problems({"v": [good, kind]}) == []
    problems = input_problems({"v": [bad, kind]})
    assert [p.split(" ", 1)[0] for p in problems] == [f"v[{i}]" for i in range(len(bad))]


def test_dicts_are_checked_key_by_key_and_value_by_value() -> None:
    problems = input_problems({"opts": [{"MaxNodes": "4", "Bad Key": "1", "Ok": "1 X=y"}, "value"]})
    assert problems == [
        'opts key "Bad Key" must be a key of letters and digits',
        "opts[\"Ok\"] \"1 X=y\" must be one word without whitespace, '#', '\"' or '\\'",
    ]


def test_unset_values_pass_and_other_types_are_named() -> None:
    assert input_problems({"v": [None, "path"]}) == []
    assert input_problems({"v": [{"a": ["x"]}, "name"]}) == []
    assert input_problems({"v": [True, "name"]}) == [
        "v true must be a name of letters, digits, _ . + or -"
    ]


def test_a_long_value_is_cut_to_one_readable_line() -> None:
    (problem,) = input_problems({"v": ["x" * 5000 + "\n", "name"]})
    assert len(problem) < 200
    assert "(5004 characters)" in problem


def test_an_unknown_kind_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="unknown kind 'nope' for v"):
        input_problems({"v": ["x", "nope"]})


def test_the_filter_is_registered() -> None:
    assert FilterModule().filters()["input_problems"] is input_problems
