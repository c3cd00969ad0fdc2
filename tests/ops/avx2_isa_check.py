"""The AVX2 kernel table runs on AVX2-only CPUs (Zen 3): its objects may hold no instruction beyond AVX2, FMA and
F16C, except AVX-VNNI's in the functions of the integer MXFP4 kernels' AvxVnni form, which the table calls only where
cpuid shows AVX-VNNI (src/backend/cpu/x86/avx2/fp4_chunk.h). Those kernels' files are built with -mavxvnni, so the
compiler may use VNNI instructions anywhere in them -- in the plain form, or in a header's inline function whose copy
the linker then shares with every other file. Nothing at run time on a VNNI machine would notice; this disassembles
the backend library's AVX2 objects and checks.

Usage: avx2_isa_check.py LIBDEEPINFER_BACKEND_A   (ctest: ops.avx2_isa_check)
"""
import re
import shutil
import subprocess
import sys

# AVX-VNNI (and AVX-VNNI-INT8 / INT16) dot products; EVEX-only registers, masks and forms (AVX-512); AMX.
VNNI = re.compile(r"^vpdp[bw]")
BEYOND_AVX2 = re.compile(r"%zmm|%[xy]mm(1[6-9]|2\d|3[01])\b|%k[0-7]\b|\{evex\}")
AMX = re.compile(r"^(tdp|tileload|tilestore|tilezero|ldtilecfg|sttilecfg|tilerelease)")
MEMBER = re.compile(r"^(\S+\.o):\s+file format")
FUNCTION = re.compile(r"^[0-9a-f]+ <(.*)>:$")
INSTRUCTION = re.compile(r"^\s*[0-9a-f]+:\s+(?:\{vex\}\s+)?(\S+)\s*(.*)$")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    objdump = shutil.which("objdump")
    if not objdump:
        sys.exit("objdump not found (binutils, installed with the compiler)")
    listing = subprocess.run([objdump, "-d", "-C", "--no-show-raw-insn", sys.argv[1]], check=True,
                             capture_output=True, text=True).stdout
    member, function = "", ""
    members, functions, vnni_in_vnni_form = set(), 0, 0
    faults = []
    for line in listing.splitlines():
        if m := MEMBER.match(line):
            member, function = m.group(1), ""
            continue
        if not member.endswith("_avx2.cpp.o"):
            continue
        members.add(member)
        if m := FUNCTION.match(line):
            function = m.group(1)
            functions += 1
            continue
        m = INSTRUCTION.match(line)
        if not m:
            continue
        mnemonic, operands = m.group(1), m.group(2)
        if VNNI.match(mnemonic) and "AvxVnni" in function:
            vnni_in_vnni_form += 1
        elif VNNI.match(mnemonic) or BEYOND_AVX2.search(operands) or AMX.match(mnemonic):
            faults.append(f"{member}: {function}: {line.strip()}")
    # a scan that saw nothing proves nothing (the library's layout or objdump's format changed)
    if len(members) < 10 or functions < 50 or vnni_in_vnni_form == 0:
        sys.exit(f"scan found {len(members)} AVX2 objects, {functions} functions, {vnni_in_vnni_form} VNNI "
                 "instructions in the AvxVnni form: expected >= 10, >= 50 and > 0")
    if faults:
        print(f"{len(faults)} instructions beyond AVX2 outside the AvxVnni form:")
        print("\n".join(faults[:40]))
        sys.exit(1)
    print(f"{len(members)} AVX2 objects, {functions} functions: AVX2 only, but {vnni_in_vnni_form} VNNI instructions "
          "in the AvxVnni form")


if __name__ == "__main__":
    main()
