// Empty: cuda.h defines the half types for the emulation.
