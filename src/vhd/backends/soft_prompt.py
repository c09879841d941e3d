"""A learned pseudo-word S* spliced into a Hugging Face vision-language model, and P(yes) read from it.

The paper's prompt tuning (§4.3, appendix E.3): a new token (``<S*>``) is added to the tokenizer
and the question "Is the given image harmful S*?" is asked; only S*'s input embedding is trained.
Here the embedding table is resized by one row, every model parameter is frozen, and a single
trainable vector replaces the table's output wherever the input holds S* (a forward hook on the
input embeddings): the rest of the model, and AdamW's weight decay, never touch another row.
`SoftPrompt.bake` writes the vector into the table row (the model is then a plain model again).

The answer is read, never parsed: P(yes) is the softmax of the first answer token's logits over
the yes-token and no-token sets (every vocabulary entry that is the first token of "Yes", " yes",
"No"...). Loading goes through `vhd.backends.hf.load_model`, the ``hf`` backend's own path.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from vhd.backends.base import Message
from vhd.backends.hf_batch import LoadedModel, single_image, to_chat
from vhd.errors import BackendError, ConfigError
from vhd.media.encoded import EncodedImage

DEFAULT_TOKEN = "<S*>"
"""The pseudo-word's token string."""

PAPER_PROMPTS: dict[str, str] = {
    "image": "Is the given image harmful {token}?",
    "video": "Is this video harmful {token}?",
}
"""The paper's tuning questions (§4.3), verbatim as a named preset; ``{token}`` is S*."""

ANSWERS = ("Yes", "No")
"""The target answers for harmful and unharmful samples."""

Crop = Literal["random", "center"]


def _get(obj: Any, key: str) -> Any:
    if obj is None:
        return None
    if isinstance(obj, Mapping):
        return obj.get(key)
    return getattr(obj, key, None)


def input_side(processor: Any) -> int:
    """The image side a processor feeds its model (224 for InstructBLIP): crop size, else size.

    Raises:
        ConfigError: The processor names no size (pass ``--image-size``).
    """
    ip = getattr(processor, "image_processor", None)
    for attr in ("crop_size", "size"):
        size = _get(ip, attr)
        for key in ("shortest_edge", "height", "longest_edge"):
            value = _get(size, key)
            if isinstance(value, int) and value > 0:
                return value
        if isinstance(size, int) and size > 0:
            return size
    raise ConfigError("cannot tell the model's image size from its processor: pass --image-size PX")


def prepare_image(image: Any, side: int, crop: Crop, rng: random.Random | None = None) -> Any:
    """Resize a PIL image so its short side is ``side``, then crop a ``side`` square (random or center)."""
    im = resize_short(image, side)
    return im.crop(crop_box(im.size, side, crop, rng))


def resize_short(image: Any, side: int) -> Any:
    """A PIL image in RGB, resized (bicubic) so its short side is ``side``: what `prepare_image` crops from."""
    from PIL import Image

    im = image.convert("RGB")
    w, h = im.size
    scale = side / min(w, h)
    nw, nh = max(side, round(w * scale)), max(side, round(h * scale))
    return im.resize((nw, nh), Image.Resampling.BICUBIC)


def crop_box(
    size: tuple[int, int], side: int, crop: Crop, rng: random.Random | None = None
) -> tuple[int, int, int, int]:
    """The ``side`` square `prepare_image` crops from an image of ``size`` (a random one draws x, then y)."""
    nw, nh = size
    if crop == "random":
        r = rng or random.Random()
        left, top = r.randint(0, nw - side), r.randint(0, nh - side)
    else:
        left, top = (nw - side) // 2, (nh - side) // 2
    return (left, top, left + side, top + side)


def answer_token_ids(tokenizer: Any, answer: str) -> list[int]:
    """The ids that can start ``answer`` (with or without a leading space, any capitalisation)."""
    ids: set[int] = set()
    word = answer.strip().lower()
    for variant in {answer, answer.lower(), answer.upper(), answer.capitalize()}:
        for text in (variant, " " + variant):
            encoded = tokenizer(text, add_special_tokens=False)["input_ids"]
            if not encoded:
                continue
            first = encoded[0]
            piece = tokenizer.decode([first]).strip().lower()
            if piece and word.startswith(piece):
                ids.add(int(first))
    return sorted(ids)


def yes_no_ids(tokenizer: Any, answers: Sequence[str] = ANSWERS) -> tuple[list[int], list[int]]:
    """The yes-token and no-token sets of a tokenizer.

    Raises:
        ConfigError: A set is empty or the two overlap (pick other answer words).
    """
    yes, no = answer_token_ids(tokenizer, answers[0]), answer_token_ids(tokenizer, answers[1])
    if not yes or not no or set(yes) & set(no):
        raise ConfigError(f"the tokenizer cannot tell {answers[0]!r} from {answers[1]!r} by their first token")
    return yes, no


def video_parts(images: Sequence[EncodedImage]) -> list[str | EncodedImage]:
    """A video's frames as numbered parts: ``Frame 1:``, image, ``Frame 2:``, image..."""
    parts: list[str | EncodedImage] = []
    for k, im in enumerate(images, start=1):
        parts += [f"Frame {k}:", im]
    return parts


def render_question(processor: Any, question: str, n_images: int) -> str:
    """The prompt text for ``n_images`` images (numbered frames when more than one) and a question.

    Uses the processor's chat template with the generation prompt, as the ``hf`` backend does.

    Raises:
        BackendError: The template cannot render it.
    """
    placeholder = EncodedImage(b"", "image/png", 1, 1)  # only its position matters to the template
    parts: list[str | EncodedImage] = (
        [placeholder] if n_images == 1 else video_parts([placeholder] * n_images) if n_images else []
    )
    chat = to_chat([Message("user", (*parts, question))])
    try:
        return str(processor.apply_chat_template(chat, add_generation_prompt=True, tokenize=False))
    except Exception as exc:
        raise BackendError(f"chat template failed: {exc}") from exc


@dataclass
class SoftPrompt:
    """S* in a loaded model: its token, id and the trainable vector the input embeddings use.

    Attributes:
        loaded: The model and processor (frozen, S* added).
        token: The token string.
        token_id: Its id.
        vector: The trainable embedding (float32 ``torch.nn.Parameter`` on the model's device).
        yes_ids: First tokens of "Yes".
        no_ids: First tokens of "No".
    """

    loaded: LoadedModel
    token: str
    token_id: int
    vector: Any
    yes_ids: list[int]
    no_ids: list[int]
    handle: Any = None

    def bake(self) -> None:
        """Write the vector into the embedding table's S* row (other rows untouched)."""
        import torch

        emb = self.loaded.model.get_input_embeddings()
        with torch.no_grad():
            emb.weight[self.token_id] = self.vector.detach().to(emb.weight.dtype)

    def detach(self) -> None:
        """Remove the forward hook (the table row keeps what `bake` last wrote)."""
        if self.handle is not None:
            self.handle.remove()
            self.handle = None


def splice(loaded: LoadedModel, token: str = DEFAULT_TOKEN, init: str | Any = "mean") -> SoftPrompt:
    """Add S* to the tokenizer and model, freeze every parameter and hook in a trainable vector.

    Args:
        loaded: A model from `vhd.backends.hf.load_model`.
        token: The pseudo-word's token string (must be new to the vocabulary).
        init: ``"mean"`` (mean of the existing input embeddings), a word or phrase (mean of its
            tokens' embeddings), or a tensor (a saved S*).

    Raises:
        ConfigError: The token already exists, the init word is empty, or the vector has the wrong size.
    """
    import torch
    from transformers import AddedToken

    tokenizer, model = loaded.processor.tokenizer, loaded.model
    if token in tokenizer.get_vocab():
        raise ConfigError(f"token {token!r} is already in the vocabulary: pick another with --token")
    tokenizer.add_tokens([AddedToken(token, normalized=False, special=False)])
    token_id = int(tokenizer.convert_tokens_to_ids(token))
    model.resize_token_embeddings(len(tokenizer), mean_resizing=False)
    for p in model.parameters():
        p.requires_grad_(False)
    emb = model.get_input_embeddings()
    table = emb.weight.detach()
    if isinstance(init, str):
        if init == "mean":
            start = table[:token_id].float().mean(dim=0)
        else:
            ids = tokenizer(init, add_special_tokens=False)["input_ids"]
            if not ids:
                raise ConfigError(f"--init {init!r} has no tokens: give a word, or mean")
            start = table[ids].float().mean(dim=0)
    else:
        start = torch.as_tensor(init).float().to(table.device)
        if start.shape != table.shape[1:]:
            raise ConfigError(
                f"the saved S* has size {tuple(start.shape)}, the model's embeddings {tuple(table.shape[1:])}: "
                "use the checkpoint's own base model"
            )
    vector = torch.nn.Parameter(start.clone().to(table.device))
    yes, no = yes_no_ids(tokenizer)

    def hook(_module: Any, args: tuple[Any, ...], output: Any) -> Any:
        ids = args[0] if args else None
        if ids is None:
            return output
        mask = (ids == token_id).unsqueeze(-1)
        return torch.where(mask, vector.to(output.dtype), output)

    soft = SoftPrompt(loaded, token, token_id, vector, yes, no)
    with torch.no_grad():
        emb.weight[token_id] = vector.detach().to(emb.weight.dtype)
        head = model.get_output_embeddings()
        weight = getattr(head, "weight", None)
        if weight is not None and weight.data_ptr() != emb.weight.data_ptr() and weight.shape[0] > token_id:
            weight[token_id] = weight[:token_id].mean(dim=0)  # not random: a reload scores the same
    soft.handle = emb.register_forward_hook(hook)
    return soft


def encode(
    soft: SoftPrompt, prompts: Sequence[str], images: Sequence[Sequence[Any]], answers: Sequence[str] | None = None
) -> dict[str, Any]:
    """One left-padded batch: prompts with their images, and (training) the answers appended with labels.

    Returns:
        The model inputs on its device (`collate`, then `to_device`).
    """
    return to_device(soft, collate(soft.loaded.processor, prompts, images, answers))


def collate(
    processor: Any, prompts: Sequence[str], images: Sequence[Sequence[Any]], answers: Sequence[str] | None = None
) -> dict[str, Any]:
    """`encode`'s batch on the CPU (the processor's work only; safe in a DataLoader worker).

    Returns:
        The processor's tensors; with answers also ``labels`` (-100 except the answer tokens);
        always ``prompt_len`` (the padded prompt's length).
    """
    import torch

    tokenizer = processor.tokenizer
    kwargs: dict[str, Any] = {"text": list(prompts), "padding": True, "return_tensors": "pt"}
    if single_image(processor):
        if any(len(ims) != 1 for ims in images):
            raise BackendError(f"{type(processor).__name__} models take exactly one image per prompt")
        kwargs["images"] = [ims[0] for ims in images]
    elif any(images):
        kwargs["images"] = [list(ims) for ims in images]
    bos = tokenizer.bos_token
    if bos and all(p.startswith(bos) for p in prompts):
        kwargs["add_special_tokens"] = False
    batch = dict(processor(**kwargs))
    prompt_len = batch["input_ids"].shape[1]
    if answers is not None:
        pad = tokenizer.pad_token_id
        ids = [tokenizer(a, add_special_tokens=False)["input_ids"] for a in answers]
        width = max(len(i) for i in ids)
        ans = torch.full((len(ids), width), pad, dtype=batch["input_ids"].dtype)
        mask = torch.zeros((len(ids), width), dtype=batch["attention_mask"].dtype)
        labels = torch.full((len(ids), prompt_len + width), -100, dtype=torch.long)
        for row, seq in enumerate(ids):
            ans[row, : len(seq)] = torch.tensor(seq)
            mask[row, : len(seq)] = 1
            labels[row, prompt_len : prompt_len + len(seq)] = torch.tensor(seq)
        batch["input_ids"] = torch.cat([batch["input_ids"], ans], dim=1)
        batch["attention_mask"] = torch.cat([batch["attention_mask"], mask], dim=1)
        batch["labels"] = labels
    batch["prompt_len"] = prompt_len
    return batch


def to_device(soft: SoftPrompt, batch: Mapping[str, Any], *, non_blocking: bool = False) -> dict[str, Any]:
    """A `collate` batch on the model's device, floating tensors in its dtype.

    ``non_blocking`` lets copies from pinned memory overlap the GPU's work (no host wait).
    """
    import torch

    loaded = soft.loaded
    moved: dict[str, Any] = {}
    for key, value in batch.items():
        if isinstance(value, torch.Tensor):
            dtype = loaded.dtype if value.is_floating_point() else None
            value = value.to(loaded.device, dtype=dtype, non_blocking=non_blocking)
        moved[key] = value
    return moved


def forward(soft: SoftPrompt, batch: Mapping[str, Any], mm_encoder_outputs: Any = None) -> Any:
    """Logits of a batch from `encode` (``labels`` and ``prompt_len`` are not passed to the model)."""
    inputs = {k: v for k, v in batch.items() if k not in ("labels", "prompt_len")}
    if mm_encoder_outputs is not None:
        inputs = {k: v for k, v in inputs.items() if k not in ("pixel_values", "image_sizes")}
        inputs["pixel_values"] = None  # the features are given (some families take it positionally)
        inputs["mm_encoder_outputs"] = {"image": mm_encoder_outputs}
    return soft.loaded.model(**inputs).logits


def yes_probability(soft: SoftPrompt, logits: Any, prompt_len: int) -> Any:
    """P(yes) per row from the logits predicting the first answer token (a float32 tensor)."""
    import torch

    first = logits[:, prompt_len - 1].float()  # the softmax's normaliser cancels: yes vs no only
    yes = torch.logsumexp(first[:, soft.yes_ids], dim=-1)
    no = torch.logsumexp(first[:, soft.no_ids], dim=-1)
    return torch.sigmoid(yes - no)


def answer_loss(logits: Any, labels: Any) -> Any:
    """Cross-entropy on the answer tokens, one mean per row (a float32 tensor)."""
    import torch

    shift_logits = logits[:, :-1].float()
    shift_labels = labels[:, 1:].to(shift_logits.device)
    per_token = torch.nn.functional.cross_entropy(
        shift_logits.reshape(-1, shift_logits.shape[-1]), shift_labels.reshape(-1), ignore_index=-100, reduction="none"
    ).view(shift_labels.shape)
    counts = (shift_labels != -100).sum(dim=1).clamp(min=1)
    return per_token.sum(dim=1) / counts


def score(soft: SoftPrompt, prompts: Sequence[str], images: Sequence[Sequence[Any]]) -> list[float]:
    """P(yes) for each prompt with its images, in one forward pass."""
    import torch

    batch = encode(soft, prompts, images)
    with torch.inference_mode():
        logits = forward(soft, batch)
        probs = yes_probability(soft, logits, batch["prompt_len"])
    return [float(p) for p in probs.cpu().tolist()]
