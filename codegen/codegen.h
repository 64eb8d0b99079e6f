/*
 * codegen.h — the code generator's interface. Everything LLVM stays behind
 * it: nothing outside codegen/ includes llvm-c/.
 */
#ifndef PRECC_CODEGEN_H
#define PRECC_CODEGEN_H

/* version.c — the LLVM the compiler is linked against, "19.1.7". */
const char *codegen_llvm_version(void);

#endif
