#!/usr/bin/env python3
"""A small OTLP receiver for the end-to-end tests: what an OpenTelemetry Collector does with
what it receives, reduced to keeping it for the test to read.

    otlp_receiver.py

It accepts OTLP over HTTP with protobuf bodies (`POST /v1/traces`, `POST /v1/logs`, gzip or
not) and over gRPC (the trace and logs services), decodes every request with the
`opentelemetry-proto` package, and keeps the spans and log records. It prints
`listening http=PORT grpc=PORT` on stderr once both accept connections (free ports on
127.0.0.1).

`GET /spans` answers every span received so far as JSON, oldest first:
`{"trace_id", "span_id", "parent_span_id", "name", "kind", "attributes", "events",
"status": {"code", "message"}, "service_name", "start_ns", "end_ns", "transport"}`;
`GET /logs` the log records: `{"body", "attributes", "severity_number", "severity_text",
"trace_id", "span_id", "service_name", "time_ns", "transport"}`.
"""

from __future__ import annotations

import gzip
import json
import sys
import threading
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import grpc
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

LOCK = threading.Lock()
SPANS: list[dict] = []
LOGS: list[dict] = []


def any_value(value) -> object:
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [any_value(item) for item in value.array_value.values]
    if kind == "kvlist_value":
        return {item.key: any_value(item.value) for item in value.kvlist_value.values}
    if kind == "bytes_value":
        return value.bytes_value.hex()
    return getattr(value, kind)


def attributes(items) -> dict:
    return {item.key: any_value(item.value) for item in items}


def keep_spans(request: trace_service_pb2.ExportTraceServiceRequest, transport: str) -> None:
    spans = []
    for resource_spans in request.resource_spans:
        service = attributes(resource_spans.resource.attributes).get("service.name")
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                spans.append(
                    {
                        "trace_id": span.trace_id.hex(),
                        "span_id": span.span_id.hex(),
                        "parent_span_id": span.parent_span_id.hex(),
                        "name": span.name,
                        "kind": span.kind,
                        "attributes": attributes(span.attributes),
                        "events": [
                            {"name": event.name, "attributes": attributes(event.attributes)}
                            for event in span.events
                        ],
                        "status": {"code": span.status.code, "message": span.status.message},
                        "service_name": service,
                        "start_ns": span.start_time_unix_nano,
                        "end_ns": span.end_time_unix_nano,
                        "transport": transport,
                    }
                )
    with LOCK:
        SPANS.extend(spans)


def keep_logs(request: logs_service_pb2.ExportLogsServiceRequest, transport: str) -> None:
    records = []
    for resource_logs in request.resource_logs:
        service = attributes(resource_logs.resource.attributes).get("service.name")
        for scope_logs in resource_logs.scope_logs:
            for record in scope_logs.log_records:
                records.append(
                    {
                        "body": any_value(record.body),
                        "attributes": attributes(record.attributes),
                        "severity_number": record.severity_number,
                        "severity_text": record.severity_text,
                        "trace_id": record.trace_id.hex(),
                        "span_id": record.span_id.hex(),
                        "service_name": service,
                        "time_ns": record.time_unix_nano,
                        "transport": transport,
                    }
                )
    with LOCK:
        LOGS.extend(records)


class Handler(BaseHTTPRequestHandler):
    def log_message(self, format, *args) -> None:  # noqa: A002 - the base class names it so
        pass

    def answer(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 - the base class names it so
        with LOCK:
            if self.path == "/spans":
                body = json.dumps(SPANS).encode()
            elif self.path == "/logs":
                body = json.dumps(LOGS).encode()
            else:
                self.answer(404, b"not found", "text/plain")
                return
        self.answer(200, body, "application/json")

    def do_POST(self) -> None:  # noqa: N802 - the base class names it so
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length)
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        if self.headers.get("Content-Type") != "application/x-protobuf":
            self.answer(415, b"protobuf bodies only", "text/plain")
            return
        try:
            if self.path == "/v1/traces":
                request = trace_service_pb2.ExportTraceServiceRequest()
                request.ParseFromString(body)
                keep_spans(request, "http")
                answer = trace_service_pb2.ExportTraceServiceResponse()
            elif self.path == "/v1/logs":
                request = logs_service_pb2.ExportLogsServiceRequest()
                request.ParseFromString(body)
                keep_logs(request, "http")
                answer = logs_service_pb2.ExportLogsServiceResponse()
            else:
                self.answer(404, b"not found", "text/plain")
                return
        except Exception as error:  # a body that does not decode is the sender's defect
            print(f"otlp_receiver: undecodable {self.path}: {error}", file=sys.stderr, flush=True)
            self.answer(400, str(error).encode(), "text/plain")
            return
        self.answer(200, answer.SerializeToString(), "application/x-protobuf")


class TraceService(trace_service_pb2_grpc.TraceServiceServicer):
    def Export(self, request, context):  # noqa: N802 - the service names it so
        keep_spans(request, "grpc")
        return trace_service_pb2.ExportTraceServiceResponse()


class LogsService(logs_service_pb2_grpc.LogsServiceServicer):
    def Export(self, request, context):  # noqa: N802 - the service names it so
        keep_logs(request, "grpc")
        return logs_service_pb2.ExportLogsServiceResponse()


def main() -> None:
    http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(TraceService(), server)
    logs_service_pb2_grpc.add_LogsServiceServicer_to_server(LogsService(), server)
    grpc_port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(
        f"listening http={http.server_address[1]} grpc={grpc_port}", file=sys.stderr, flush=True
    )
    try:
        http.serve_forever()
    finally:
        server.stop(0)


if __name__ == "__main__":
    main()
