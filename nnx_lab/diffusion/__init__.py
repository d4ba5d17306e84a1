"""Denoising diffusion (DDPM) on the step and objective hooks (§3.3): issue 25."""
