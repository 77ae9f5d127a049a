"""scripts/gpu/sass_loops.py: a loop is a backward branch's range, counted by opcode with the
predicates and modifiers stripped; forward branches are not loops; a kernel filter that matches
nothing is an error."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts", "gpu"))
import sass_loops  # noqa: E402

SCRIPT = os.path.join(ROOT, "scripts", "gpu", "sass_loops.py")

# Two functions in cuobjdump's layout: the first has a forward branch and two loops (one nested
# range ending in a predicated branch), the second none.
LISTING = """
	code for sm_87
		Function : _Z3fooPi
	.headerflags	@"EF_CUDA_SM87 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM87)"
        /*0000*/                   MOV R1, c[0x0][0x28] ;            /* 0x00000a0000017a02 */
        /*0010*/              @P0 BRA 0x60 ;                         /* 0x0000004000000947 */
        /*0020*/                   LDG.E.128 R4, [R2.64] ;           /* 0x0000000402047981 */
        /*0030*/                   IDP.4A.S8.S8 R8, R4, R5, R8 ;     /* 0x0000000504087226 */
        /*0040*/                   IDP.4A.S8.S8 R9, R6, R7, R9 ;     /* 0x0000000706097226 */
        /*0050*/              @!P1 BRA 0x20 ;                        /* 0x0000000000008947 */
        /*0060*/                   FADD R0, R8, R9 ;                 /* 0x0000000908007221 */
        /*0070*/                   BRA `(.L_x_3) 0x60 ;              /* 0xfffffff000007947 */
        /*0080*/                   EXIT ;                            /* 0x000000000000794d */
		..........

		Function : _Z3barv
	.headerflags	@"EF_CUDA_SM87 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM87)"
        /*0000*/                   EXIT ;                            /* 0x000000000000794d */
		..........
"""


def test_loops_are_backward_branches_counted_by_opcode():
    funcs = sass_loops.parse(LISTING)
    assert [name for name, _ in funcs] == ["_Z3fooPi", "_Z3barv"]
    foo = funcs[0][1]
    assert len(foo) == 9
    found = sass_loops.loops(foo)
    assert found == [(0x20, 0x50, {"LDG": 1, "IDP": 2, "BRA": 1}), (0x60, 0x70, {"FADD": 1, "BRA": 1})]
    assert sass_loops.loops(funcs[1][1]) == []


def test_cli_filters_kernels_and_fails_when_none_match(tmp_path):
    path = tmp_path / "k.sass"
    path.write_text(LISTING)
    run = subprocess.run([sys.executable, SCRIPT, str(path), "--kernel", "foo"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.strip().split("\n")
    assert lines[0].startswith("foo(int*): 9 instructions") or lines[0].startswith("_Z3fooPi: 9 instructions")
    assert lines[1] == "  loop 0x20..0x50: 4 IDP 2 BRA 1 LDG 1"
    assert lines[2] == "  loop 0x60..0x70: 2 BRA 1 FADD 1"
    assert len(lines) == 3
    none = subprocess.run([sys.executable, SCRIPT, str(path), "--kernel", "nothing"], capture_output=True, text=True)
    assert none.returncode == 1 and "no kernel matched" in none.stderr
