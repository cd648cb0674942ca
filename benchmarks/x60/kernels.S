/* RVV micro-kernels of benchmarks/x60_fidelity.py, in assembly so that the instructions counted are the ones
 * named: each does the work of one rvv-bench variant measured on the SpacemiT X60 (see x60_fidelity.py for which).
 * Every function is its own launcher (<name>_wrap): the icount plugin's window is exactly one call. */

#define FUNC(name) .globl name; .type name, @function; name:
#define END(name) .size name, .-name

/* copy_vlmax_m<L>_wrap(dst a0, src a1, n a2): vl = vsetvli(remaining bytes) at e8, LMUL L, until done. */
.macro COPY_VLMAX lmul
FUNC(copy_vlmax_m\lmul\()_wrap)
	mv a3, a0
1:	vsetvli t0, a2, e8, m\lmul, ta, ma
	vle8.v v8, (a1)
	add a1, a1, t0
	sub a2, a2, t0
	vse8.v v8, (a3)
	add a3, a3, t0
	bnez a2, 1b
	ret
END(copy_vlmax_m\lmul\()_wrap)
.endm

/* copy_vl16_m<L>_wrap(dst a0, src a1, n a2): 16 bytes per vle8/vse8 pair whatever LMUL L (VLMAX >= 32 at
 * VLEN 256), the n % 16 tail once at the end. */
.macro COPY_VL16 lmul
FUNC(copy_vl16_m\lmul\()_wrap)
	li t0, 16
	bgeu a2, t0, 1f
	mv t0, a2
1:	vsetvli t0, t0, e8, m\lmul, ta, ma
	remu t1, a2, t0          /* tail bytes */
	sub a2, a2, t1
	add t2, a0, a2           /* end of the whole chunks in dst */
2:	vle8.v v8, (a1)
	add a1, a1, t0
	vse8.v v8, (a0)
	add a0, a0, t0
	bltu a0, t2, 2b
	vsetvli zero, t1, e8, m\lmul, ta, ma
	vle8.v v8, (a1)
	vse8.v v8, (a0)
	ret
END(copy_vl16_m\lmul\()_wrap)
.endm

/* fill_vlmax_m<L>_wrap(dst a0, byte a1, n a2): one splat, then vse8 of vsetvli(remaining) bytes until done. */
.macro FILL_VLMAX lmul
FUNC(fill_vlmax_m\lmul\()_wrap)
	vsetvli t0, zero, e8, m\lmul, ta, ma
	vmv.v.x v8, a1
1:	vsetvli t0, a2, e8, m\lmul, ta, ma
	vse8.v v8, (a0)
	sub a2, a2, t0
	add a0, a0, t0
	bnez a2, 1b
	ret
END(fill_vlmax_m\lmul\()_wrap)
.endm

/* The single-instruction streams (rvv-bench's instruction tables: 64 copies per loop trip, vl = VLMAX, e32):
 * strided_e32m<L>_wrap(base a0, stride a1, trips a2): vlse32.v; redsum_e32m<L>_wrap(trips a0): vfredusum.vs;
 * fmacc_e32m<L>_wrap(trips a0, scalar fa0): vfmacc.vf, the same accumulator each time, as the table measured. */
.macro STREAMS lmul
FUNC(strided_e32m\lmul\()_wrap)
	vsetvli t0, zero, e32, m\lmul, ta, ma
1:	.rept 64
	vlse32.v v8, (a0), a1
	.endr
	addi a2, a2, -1
	bnez a2, 1b
	ret
END(strided_e32m\lmul\()_wrap)

FUNC(redsum_e32m\lmul\()_wrap)
	vsetvli t0, zero, e32, m\lmul, ta, ma
	vmv.v.i v16, 0
	vmv.v.i v24, 0
1:	.rept 64
	vfredusum.vs v8, v16, v24
	.endr
	addi a0, a0, -1
	bnez a0, 1b
	ret
END(redsum_e32m\lmul\()_wrap)

FUNC(fmacc_e32m\lmul\()_wrap)
	vsetvli t0, zero, e32, m\lmul, ta, ma
	vmv.v.i v8, 0
	vmv.v.i v16, 0
1:	.rept 64
	vfmacc.vf v8, fa0, v16
	.endr
	addi a0, a0, -1
	bnez a0, 1b
	ret
END(fmacc_e32m\lmul\()_wrap)
.endm

	.text
	.option arch, +v
COPY_VLMAX 1
COPY_VLMAX 2
COPY_VLMAX 4
COPY_VLMAX 8
COPY_VL16 1
COPY_VL16 2
COPY_VL16 4
COPY_VL16 8
FILL_VLMAX 1
FILL_VLMAX 2
FILL_VLMAX 4
FILL_VLMAX 8
STREAMS 1
STREAMS 2
STREAMS 4
STREAMS 8

/* peak_e32m8_wrap(trips a0, scalars fa0 fa1 fa2): a GEMM-like FMA loop, three independent e32m8 accumulators
 * (v0, v8, v24) fed from one vector (v16), 63 vfmacc.vf per trip: 63 x 64 x 2 FLOP. */
FUNC(peak_e32m8_wrap)
	vsetvli t0, zero, e32, m8, ta, ma
	vmv.v.i v0, 0
	vmv.v.i v8, 0
	vmv.v.i v16, 0
	vmv.v.i v24, 0
1:	.rept 21
	vfmacc.vf v0, fa0, v16
	vfmacc.vf v8, fa1, v16
	vfmacc.vf v24, fa2, v16
	.endr
	addi a0, a0, -1
	bnez a0, 1b
	ret
END(peak_e32m8_wrap)
