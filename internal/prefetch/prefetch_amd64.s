#include "textflag.h"

// func prefetch(p unsafe.Pointer, size uintptr)
TEXT ·prefetch(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), AX
	MOVQ size+8(FP), CX
	ADDQ AX, CX
	PREFETCHT0 -1(CX)
loop:
	PREFETCHT0 (AX)
	ADDQ $64, AX
	CMPQ AX, CX
	JB loop
	RET
