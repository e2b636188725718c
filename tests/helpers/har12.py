"""HAR 1.2's required structure as a JSON Schema (http://www.softwareishard.com/blog/har-12-spec/).

Only what the spec marks required, with its types, plus its rule for custom fields
(names starting with an underscore); haralyzer reads a HAR without checking any of it.
"""

from __future__ import annotations

from typing import Any


def _obj(required: dict[str, Any], **optional: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "required": sorted(required),
        "properties": {**required, **optional},
        # Anything else must be a custom field: "_name".
        "patternProperties": {"^_": {}},
        "additionalProperties": False,
    }


_NAME_VALUE = _obj({"name": {"type": "string"}, "value": {"type": "string"}}, comment={})
_TIMING = {"type": "number", "minimum": -1}

HAR_1_2: dict[str, Any] = {
    "type": "object",
    "required": ["log"],
    "properties": {
        "log": _obj(
            {
                "version": {"const": "1.2"},
                "creator": _obj(
                    {"name": {"type": "string"}, "version": {"type": "string"}}, comment={}
                ),
                "entries": {
                    "type": "array",
                    "items": _obj(
                        {
                            "startedDateTime": {"type": "string", "format": "date-time"},
                            "time": {"type": "number", "minimum": 0},
                            "request": _obj(
                                {
                                    "method": {"type": "string"},
                                    "url": {"type": "string"},
                                    "httpVersion": {"type": "string"},
                                    "cookies": {"type": "array"},
                                    "headers": {"type": "array", "items": _NAME_VALUE},
                                    "queryString": {"type": "array", "items": _NAME_VALUE},
                                    "headersSize": {"type": "integer"},
                                    "bodySize": {"type": "integer"},
                                },
                                postData={},
                                comment={},
                            ),
                            "response": _obj(
                                {
                                    "status": {"type": "integer"},
                                    "statusText": {"type": "string"},
                                    "httpVersion": {"type": "string"},
                                    "cookies": {"type": "array"},
                                    "headers": {"type": "array", "items": _NAME_VALUE},
                                    "content": _obj(
                                        {
                                            "size": {"type": "integer"},
                                            "mimeType": {"type": "string"},
                                        },
                                        compression={},
                                        text={},
                                        encoding={},
                                        comment={},
                                    ),
                                    "redirectURL": {"type": "string"},
                                    "headersSize": {"type": "integer"},
                                    "bodySize": {"type": "integer"},
                                },
                                comment={},
                            ),
                            "cache": {"type": "object"},
                            "timings": _obj(
                                {
                                    # send, wait and receive have no "does not apply" -1.
                                    "send": {"type": "number", "minimum": 0},
                                    "wait": {"type": "number", "minimum": 0},
                                    "receive": {"type": "number", "minimum": 0},
                                },
                                blocked=_TIMING,
                                dns=_TIMING,
                                connect=_TIMING,
                                ssl=_TIMING,
                                comment={},
                            ),
                        },
                        pageref={"type": "string"},
                        serverIPAddress={"type": "string"},
                        connection={"type": "string"},
                        comment={},
                    ),
                },
            },
            browser={},
            pages={"type": "array"},
            comment={},
        )
    },
}
