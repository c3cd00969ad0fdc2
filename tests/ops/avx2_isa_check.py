"""The AVX2 kernel table runs on AVX2-only CPUs (Zen 3): its objects may hold no instruction beyond AVX2, FMA and
F16C, except in the integer MXFP4 kernels' VNNI forms, which the table calls only where cpuid shows them
(src/backend/cpu/x86/avx2/fp4_chunk.h): VEX-encoded VNNI (AVX-VNNI) only in functions named with AvxVnni, EVEX
encodings (AVX512-VNNI with AVX512F / BW / VL: the dot products on ymm, the panel GEMM's zmm tile) only in those
named with EvexVnni. Those kernels' files are
built with -mavxvnni, so the compiler may use VNNI instructions anywhere in them -- in the plain form, or in a
header's inline function whose copy the linker then shares with every other file. Nothing at run time on a VNNI
machine would notice; this disassembles the backend library's AVX2 objects and checks. An instruction is EVEX-encoded
when its first byte is 0x62 (in 64-bit mode always EVEX); objdump marks VEX-encoded VNNI with {vex}.

In the emulated build (DEEPINFER_EMULATE_AVX512, preset avx512emu: --vex-vnni-emulated) the AvxVnni form's dot
products are AVX2 code (src/backend/cpu/x86/avx2/emulated_vnni.h) and its objects are built without -mavxvnni; there
the check asks for no VEX-encoded VNNI instruction at all, so that one left in inline assembly (which the assembler
takes whatever the compiler's flags) cannot fault on the AVX2-only CPUs that build runs on.

Usage: avx2_isa_check.py [--vex-vnni-emulated] LIBDEEPINFER_BACKEND_A   (ctest: ops.avx2_isa_check)
"""
import re
import shutil
import subprocess
import sys

# AVX-VNNI (and AVX-VNNI-INT8 / INT16) dot products; EVEX-only registers, masks and forms (AVX-512); AMX.
VNNI = re.compile(r"^vpdp[bw]")
BEYOND_AVX2 = re.compile(r"%zmm|%[xy]mm(1[6-9]|2\d|3[01])\b|%k[0-7]\b")  # (EVEX itself: by its first byte)
AMX = re.compile(r"^(tdp|tileload|tilestore|tilezero|ldtilecfg|sttilecfg|tilerelease)")
MEMBER = re.compile(r"^(\S+\.o):\s+file format")
FUNCTION = re.compile(r"^[0-9a-f]+ <(.*)>:$")
# address, raw bytes, then the instruction (objdump wraps long byte runs onto lines without one)
INSTRUCTION = re.compile(r"^\s*[0-9a-f]+:\t((?:[0-9a-f]{2} )+)\s*\t(?:\{e?vex\}\s+)?(\S+)\s*(.*)$")


def main():
    args = sys.argv[1:]
    emulated = "--vex-vnni-emulated" in args
    args = [a for a in args if a != "--vex-vnni-emulated"]
    if len(args) != 1:
        sys.exit(__doc__)
    objdump = shutil.which("objdump")
    if not objdump:
        sys.exit("objdump not found (binutils, installed with the compiler)")
    listing = subprocess.run([objdump, "-d", "-C", args[0]], check=True,
                             capture_output=True, text=True).stdout
    member, function = "", ""
    members, functions, vex_vnni, evex_vnni = set(), 0, 0, 0
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
        evex, mnemonic, operands = m.group(1).startswith("62 "), m.group(2), m.group(3)
        beyond = BEYOND_AVX2.search(operands) or AMX.match(mnemonic)
        if VNNI.match(mnemonic) and not evex and "AvxVnni" in function and not beyond and not emulated:
            vex_vnni += 1
        elif "EvexVnni" in function and (evex or BEYOND_AVX2.search(operands)) and not AMX.match(mnemonic):
            evex_vnni += VNNI.match(mnemonic) is not None
        elif VNNI.match(mnemonic) or evex or beyond:
            faults.append(f"{member}: {function}: {line.strip()}")
    # a scan that saw nothing proves nothing (the library's layout or objdump's format changed)
    if len(members) < 10 or functions < 50 or (vex_vnni == 0) != emulated or evex_vnni == 0:
        sys.exit(f"scan found {len(members)} AVX2 objects, {functions} functions, {vex_vnni} / {evex_vnni} VNNI "
                 "instructions in the AvxVnni / EvexVnni forms: expected >= 10, >= 50, "
                 f"{'none (emulated)' if emulated else '> 0'} and > 0")
    if faults:
        print(f"{len(faults)} instructions beyond AVX2 outside the VNNI forms (or in the other form's encoding):")
        print("\n".join(faults[:40]))
        sys.exit(1)
    vex = "its dot products emulated" if emulated else f"{vex_vnni} VEX-encoded VNNI instructions"
    print(f"{len(members)} AVX2 objects, {functions} functions: AVX2 only, but {vex} in the AvxVnni form and "
          f"{evex_vnni} EVEX-encoded ones (AVX-512 too) in the EvexVnni form")


if __name__ == "__main__":
    main()
