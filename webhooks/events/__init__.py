"""Events: the catalogue of types, their schemas and samples, the checks of emit's input, the envelope."""
