"""The score read-out in float32 from a bfloat16 model's last hidden state (:class:`Float32Head`)."""

from __future__ import annotations

import torch


class Float32Head:
    """A model's final norm and LM head, re-run in float32 on the hidden state of the score position.

    Why: in bfloat16 the model's own logits are rounded to 8 significant bits, a step of 1/16 to 1/8 for
    logits of 16 to 32. Two ways of computing the same score (batched or alone, shared prefix or not)
    leave hidden states that differ in their last bits; that can move a logit by a whole step, and the
    expected score with it (up to 0.107 on the 0-6 scale in the H100 run). Read in float32, the same
    hidden states give logits that differ by their own small difference only.

    How: a forward hook on the language model's final norm keeps its input at the last position; a
    float32 copy of the norm (a vector of ``d_model``) and the LM head's weight, upcast a slice of the
    vocabulary at a time, give the logits. The first read-out is checked against the model's own
    logits; a model whose head is not a plain norm-then-linear (logit scaling, soft-capping) fails that
    check and keeps its own logits, with a warning. Not used for float32 weights (nothing to gain) nor
    for weights a sharding engine holds (FSDP, DeepSpeed ZeRO-3), nor a quantized head.
    """

    #: vocabulary rows upcast at a time (32768 x 2560 x 4 bytes = 335 MB for a 4B judge)
    CHUNK = 32768

    def __init__(self, norm: torch.nn.Module, head: torch.nn.Linear):
        import copy

        self.norm = norm
        self.norm32 = copy.deepcopy(norm).float()
        self.head = head
        self.usable = True
        self._checked = False

    @classmethod
    def find(cls, model) -> Float32Head | None:
        """The float32 read-out of ``model``, or None where it does not apply (see the class doc)."""
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        head = base.get_output_embeddings() if hasattr(base, "get_output_embeddings") else None
        if type(head) is not torch.nn.Linear:
            return None
        w = head.weight
        if w.dtype not in (torch.bfloat16, torch.float16) or hasattr(w, "ds_id") or _is_dtensor(w):
            return None
        cfg = base.config.get_text_config() if hasattr(base.config, "get_text_config") else base.config
        if getattr(cfg, "final_logit_softcapping", None) or getattr(cfg, "logit_scale", None):
            return None
        norm = None
        for path in ("model.language_model", "language_model", "model.text_model", "model"):
            lm = base
            for part in path.split("."):
                lm = getattr(lm, part, None)
            norm = getattr(lm, "norm", None) if lm is not None else None
            if isinstance(norm, torch.nn.Module):
                break
        if not isinstance(norm, torch.nn.Module) or any(_is_dtensor(p) for p in norm.parameters()):
            return None
        return cls(norm, head)

    def capture(self, positions: torch.Tensor | None = None):
        """A context in which each forward keeps the final norm's input at the last position of each row,
        or (a packed row) at ``positions``."""
        import contextlib

        captured: list[torch.Tensor] = []

        def hook(_module, args, _output):
            hidden = args[0]
            captured.append((hidden[:, -1, :] if positions is None else hidden[0, positions, :]).detach())

        @contextlib.contextmanager
        def ctx():
            handle = self.norm.register_forward_hook(hook)
            try:
                yield captured
            finally:
                handle.remove()

        return ctx()

    def logits(self, hidden: torch.Tensor, model_logits: torch.Tensor) -> torch.Tensor:
        """Float32 logits from the final norm's input ``hidden`` (rows x d_model); ``model_logits`` are the
        model's own (checked against once, and returned when the check fails)."""
        h = self.norm32(hidden.float())
        w = self.head.weight
        out = torch.empty(h.shape[0], w.shape[0], dtype=torch.float32, device=h.device)
        for i in range(0, w.shape[0], self.CHUNK):
            out[:, i : i + self.CHUNK] = h @ w[i : i + self.CHUNK].float().T
        if self.head.bias is not None:
            out += self.head.bias.float()
        if not self._checked:
            self._checked = True
            ref = model_logits.float()
            err = float((out - ref).abs().max())
            tol = 0.05 * (1.0 + float(ref.abs().max()))
            if not err <= tol:
                import logging

                logging.getLogger(__name__).warning(
                    f"the float32 read-out differs from the model's own logits by {err:.3g} (over {tol:.3g}): "
                    "this model's head is not a plain norm then linear layer; reading its own logits instead"
                )
                self.usable = False
                return ref
        return out


def _is_dtensor(t: torch.Tensor) -> bool:
    try:
        from torch.distributed.tensor import DTensor
    except ImportError:  # pragma: no cover - torch without distributed
        return False
    return isinstance(t, DTensor) or isinstance(getattr(t, "data", None), DTensor)
