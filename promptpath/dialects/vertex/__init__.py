"""Gemini on Vertex AI (``projects/P/locations/L/publishers/google/models/M``), one plug-in.

The same ``GenerateContentResponse`` stream as the Gemini API (gemini/, whose decoder
reads it), on Vertex AI's paths and auth: an OAuth access token as a bearer token.
"""

from __future__ import annotations

from promptpath.dialects.gemini import VERTEX_PATH, GeminiDecoder, body
from promptpath.dialects.spec import DialectSpec, DocRow, model_named_in_path

__all__ = [
    "SPEC",
]


SPEC = DialectSpec(
    name="vertex",
    title="Vertex AI",
    path_patterns=(VERTEX_PATH,),
    model_in_path=model_named_in_path,
    default_model="gemini-2.5-flash",
    # Vertex takes an OAuth access token (google-auth's ADC in the SDK): no variable of
    # its own, the user names one with --api-key-env (e.g. from `gcloud auth print-access-token`).
    key_env=None,
    client="google-genai",
    body=body,
    decoder=GeminiDecoder,
    otel_provider="gcp.vertex_ai",
    otel_operation="generate_content",
    emulation="VertexGenerateContent",
    docs=(
        DocRow(
            detection="`…/projects/P/locations/L/publishers/google/models/M:streamGenerateContent`",
            auth="`Authorization: Bearer` (an OAuth access token)",
            keys="none: name one with `--api-key-env` (e.g. the output of"
            " `gcloud auth print-access-token`)",
            end="as gemini",
        ),
    ),
)
