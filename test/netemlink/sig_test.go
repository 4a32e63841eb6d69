package netemlink

import "syscall"

const syscallSIGTERM = syscall.SIGTERM
