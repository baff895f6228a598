#include "textflag.h"

// func int80() int32
TEXT ·int80(SB), NOSPLIT, $0-4
	MOVL $20, AX
	INT $0x80
	MOVL AX, ret+0(FP)
	RET
