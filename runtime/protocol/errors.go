package protocol

import (
	"errors"
	"fmt"
	"time"
)

// Code is a stable wire error code (wire-core §7).
type Code string

// Core and extension codes the host can produce. Names are copied exactly
// from the spec.
const (
	CodeUnauthorized               Code = "UNAUTHORIZED"
	CodeForbidden                  Code = "FORBIDDEN"
	CodeOriginDenied               Code = "ORIGIN_DENIED"
	CodeNotFound                   Code = "NOT_FOUND"
	CodeBodyTooLarge               Code = "BODY_TOO_LARGE"
	CodeInvalidRequest             Code = "INVALID_REQUEST"
	CodeUnsupportedProtocolVersion Code = "UNSUPPORTED_PROTOCOL_VERSION"
	CodeUnknownProvider            Code = "UNKNOWN_PROVIDER"
	CodeUnsupportedModel           Code = "UNSUPPORTED_MODEL"
	CodeUnsupportedCapability      Code = "UNSUPPORTED_CAPABILITY"
	CodeUnsupportedTools           Code = "UNSUPPORTED_TOOLS"
	CodeUnknownTool                Code = "UNKNOWN_TOOL"
	CodeInvalidSchema              Code = "INVALID_SCHEMA"
	CodeIdempotencyUnavailable     Code = "IDEMPOTENCY_UNAVAILABLE"
	CodeToolStreamRequired         Code = "TOOL_STREAM_REQUIRED"
	CodeApprovalStreamRequired     Code = "APPROVAL_STREAM_REQUIRED"
	CodeToolOutputLimit            Code = "TOOL_OUTPUT_LIMIT"
	CodeHostStarting               Code = "HOST_STARTING"
	CodeHostShuttingDown           Code = "HOST_SHUTTING_DOWN"
	CodeBusy                       Code = "BUSY"
	CodeQueueFull                  Code = "QUEUE_FULL"
	CodeRateLimited                Code = "RATE_LIMITED"
	CodeAdmissionIdentityRequired  Code = "ADMISSION_IDENTITY_REQUIRED"
	CodeResourceLimit              Code = "RESOURCE_LIMIT"
	CodeResourceUsageUnknown       Code = "RESOURCE_USAGE_UNKNOWN"
	CodeResourceAdmissionDenied    Code = "RESOURCE_ADMISSION_DENIED"
	CodeResourcePolicyUnavailable  Code = "RESOURCE_POLICY_UNAVAILABLE"
	CodeIdleTimeout                Code = "IDLE_TIMEOUT"
	CodeTimeout                    Code = "TIMEOUT"
	CodeCancelled                  Code = "CANCELLED"
	CodeOutputBufferLimit          Code = "OUTPUT_BUFFER_LIMIT"
	CodeStepLimit                  Code = "STEP_LIMIT"
	CodeToolLimit                  Code = "TOOL_LIMIT"
	CodeToolNotAllowed             Code = "TOOL_NOT_ALLOWED"
	CodeInvalidToolCall            Code = "INVALID_TOOL_CALL"
	CodeInvalidToolArguments       Code = "INVALID_TOOL_ARGUMENTS"
	CodeToolFailed                 Code = "TOOL_FAILED"
	CodeToolOutcomeUncertain       Code = "TOOL_OUTCOME_UNCERTAIN"
	CodeApprovalRequired           Code = "APPROVAL_REQUIRED"
	CodeApprovalDenied             Code = "APPROVAL_DENIED"
	CodeApprovalExpired            Code = "APPROVAL_EXPIRED"
	CodeInvalidOutput              Code = "INVALID_OUTPUT"
	CodeProviderAuth               Code = "PROVIDER_AUTH"
	CodeProviderUnreachable        Code = "PROVIDER_UNREACHABLE"
	CodeProviderError              Code = "PROVIDER_ERROR"
	CodeProviderFailed             Code = "PROVIDER_FAILED"
	CodeProviderRefusal            Code = "PROVIDER_REFUSAL"
	CodeTruncatedToolCall          Code = "TRUNCATED_TOOL_CALL"
	CodeInvalidProviderResponse    Code = "INVALID_PROVIDER_RESPONSE"
	CodeInvalidProviderResult      Code = "INVALID_PROVIDER_RESULT"
	CodeResponseTooLarge           Code = "RESPONSE_TOO_LARGE"
	CodeIncompleteStream           Code = "INCOMPLETE_STREAM"
	CodeAuthRequired               Code = "AUTH_REQUIRED"
	CodeProviderExtensionUnavail   Code = "PROVIDER_EXTENSION_UNAVAILABLE"
	CodeInternalError              Code = "INTERNAL_ERROR"
	CodeSessionsUnavailable        Code = "SESSIONS_UNAVAILABLE"
	CodeRetrievalUnavailable       Code = "RETRIEVAL_UNAVAILABLE"
	CodeApplicationToolsUnavail    Code = "APPLICATION_TOOLS_UNAVAILABLE"
	CodeApprovalUnavailable        Code = "APPROVAL_UNAVAILABLE"
	CodeTLSRequired                Code = "TLS_REQUIRED"

	// Interactive approvals and application tools (wire-extensions §4.8,
	// §5.6).
	CodeApprovalPolicy         Code = "APPROVAL_POLICY"
	CodeInvalidApproval        Code = "INVALID_APPROVAL"
	CodeApprovalNotFound       Code = "APPROVAL_NOT_FOUND"
	CodeApprovalMismatch       Code = "APPROVAL_MISMATCH"
	CodeApprovalCapacity       Code = "APPROVAL_CAPACITY"
	CodeApprovalAuditFailed    Code = "APPROVAL_AUDIT_FAILED"
	CodeInvalidToolExecution   Code = "INVALID_TOOL_EXECUTION"
	CodeInvalidToolOutput      Code = "INVALID_TOOL_OUTPUT"
	CodeToolDefinitionLimit    Code = "TOOL_DEFINITION_LIMIT"
	CodeToolDefinitionConflict Code = "TOOL_DEFINITION_CONFLICT"
	CodeToolExecutionMismatch  Code = "TOOL_EXECUTION_MISMATCH"
	CodeToolExecutionNotFound  Code = "TOOL_EXECUTION_NOT_FOUND"
	CodeToolExecutorCapacity   Code = "TOOL_EXECUTOR_CAPACITY"
	CodeApplicationToolFailed  Code = "APPLICATION_TOOL_FAILED"

	// Durable state (wire-extensions §2, §3, §8; wire-core §15).
	CodeIdempotencyConflict       Code = "IDEMPOTENCY_CONFLICT"
	CodeOperationInProgress       Code = "OPERATION_IN_PROGRESS"
	CodeOperationUncertain        Code = "OPERATION_UNCERTAIN"
	CodeOperationStoreError       Code = "OPERATION_STORE_ERROR"
	CodeOperationStoreFull        Code = "OPERATION_STORE_FULL"
	CodeOperationRecordLimit      Code = "OPERATION_RECORD_LIMIT"
	CodeSessionNotFound           Code = "SESSION_NOT_FOUND"
	CodeSessionRevisionConflict   Code = "SESSION_REVISION_CONFLICT"
	CodeSessionBusy               Code = "SESSION_BUSY"
	CodeSessionInterrupted        Code = "SESSION_INTERRUPTED"
	CodeSessionProviderMismatch   Code = "SESSION_PROVIDER_MISMATCH"
	CodeSessionAccountChanged     Code = "SESSION_ACCOUNT_CHANGED"
	CodeSessionCapacity           Code = "SESSION_CAPACITY"
	CodeInvalidSession            Code = "INVALID_SESSION"
	CodeUnsupportedContinuation   Code = "UNSUPPORTED_CONTINUATION"
	CodeSessionAccountRequired    Code = "SESSION_ACCOUNT_REQUIRED"
	CodeSessionHistoryConflict    Code = "SESSION_HISTORY_CONFLICT"
	CodeSessionContextUnsupported Code = "SESSION_CONTEXT_UNSUPPORTED"
	CodeSessionContextLimit       Code = "SESSION_CONTEXT_LIMIT"
	CodeInvalidSessionState       Code = "INVALID_SESSION_STATE"
	CodeSessionDeleted            Code = "SESSION_DELETED"
	CodeJobsUnavailable           Code = "JOBS_UNAVAILABLE"
	CodeInvalidJob                Code = "INVALID_JOB"
	CodeInvalidJobCursor          Code = "INVALID_JOB_CURSOR"
	CodeJobRequestUnsupported     Code = "JOB_REQUEST_UNSUPPORTED"
	CodeJobAccountRequired        Code = "JOB_ACCOUNT_REQUIRED"
	CodeJobStoreFull              Code = "JOB_STORE_FULL"
	CodeJobNotFound               Code = "JOB_NOT_FOUND"
	CodeJobExpired                Code = "JOB_EXPIRED"
	CodeJobStoreError             Code = "JOB_STORE_ERROR"
	CodeJobStoreClosed            Code = "JOB_STORE_CLOSED"
	CodeJobLeaseLost              Code = "JOB_LEASE_LOST"
	CodeJobWorkerBusy             Code = "JOB_WORKER_BUSY"
	CodeJobAccountChanged         Code = "JOB_ACCOUNT_CHANGED"
	CodeJobEventConflict          Code = "JOB_EVENT_CONFLICT"
	CodeJobRecordLimit            Code = "JOB_RECORD_LIMIT"
	CodeJobInterrupted            Code = "JOB_INTERRUPTED"
	CodeContextReplayUnavailable  Code = "CONTEXT_REPLAY_UNAVAILABLE"

	// Client-only codes (raised by the Go client, never sent by the host).
	CodeInvalidStream     Code = "INVALID_STREAM"
	CodeInvalidResponse   Code = "INVALID_RESPONSE"
	CodeUnsupportedEvent  Code = "UNSUPPORTED_EVENT"
	CodeHTTPError         Code = "HTTP_ERROR"
	CodeInsecureTransport Code = "INSECURE_TRANSPORT"
)

// OutcomeUncertain is the only value of ErrorInfo.outcome.
const OutcomeUncertain = "uncertain"

// Error is a public wire error: what a client may see. Err, when set, is the
// private cause for logs inside the host; it never reaches the wire.
type Error struct {
	Code      Code
	Message   string
	Retryable bool
	// Uncertain marks outcome:"uncertain" (effects may have happened).
	Uncertain bool
	// RetryAfter is the upstream's Retry-After hint of a RATE_LIMITED
	// failure (0: none). The engine's opt-in provider retries wait at
	// least this long (wire-core §15.4); it is not part of the wire shape.
	RetryAfter time.Duration
	// Err is the private cause (logged by the host, never sent).
	Err error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// ErrorInfo is the wire shape of an error (wire-core §7.1).
type ErrorInfo struct {
	Code      Code   `json:"code"`
	Message   string `json:"message"`
	Retryable bool   `json:"retryable"`
	Outcome   string `json:"outcome,omitempty"`
}

// Info returns the wire shape of e.
func (e *Error) Info() ErrorInfo {
	info := ErrorInfo{Code: e.Code, Message: e.Message, Retryable: e.Retryable}
	if e.Uncertain {
		info.Outcome = OutcomeUncertain
	}
	return info
}

// New returns a public error with the code's fixed message and default
// retryability.
func New(code Code) *Error {
	return &Error{Code: code, Message: Message(code), Retryable: DefaultRetryable(code)}
}

// Errorf returns a public error with a custom message. The message must be
// safe to show to a client: never include upstream bodies, stderr, secrets or
// user data.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Retryable: DefaultRetryable(code)}
}

// Wrap returns New(code) carrying err as its private cause.
func Wrap(code Code, err error) *Error {
	e := New(code)
	e.Err = err
	return e
}

// CodeOf returns the code of the first *Error in err's chain, INTERNAL_ERROR
// for any other non-nil error, and "" for nil.
func CodeOf(err error) Code {
	if err == nil {
		return ""
	}
	var pe *Error
	if errors.As(err, &pe) {
		return pe.Code
	}
	return CodeInternalError
}

// AsPublic returns the *Error in err's chain, or INTERNAL_ERROR with the
// fixed message (carrying err as the private cause) for anything else.
func AsPublic(err error) *Error {
	var pe *Error
	if errors.As(err, &pe) {
		return pe
	}
	return Wrap(CodeInternalError, err)
}

// HTTPStatus maps a code to its HTTP status (wire-core §7.2). Any code not
// in the table is 502, except INTERNAL_ERROR which is 500.
func HTTPStatus(code Code) int {
	if s, ok := statusTable[code]; ok {
		return s
	}
	return 502
}

var statusTable = map[Code]int{
	CodeUnauthorized:               401,
	CodeForbidden:                  403,
	CodeOriginDenied:               403,
	CodeNotFound:                   404,
	CodeBodyTooLarge:               413,
	CodeInvalidRequest:             400,
	CodeUnsupportedProtocolVersion: 400,
	CodeUnknownProvider:            400,
	CodeUnsupportedModel:           400,
	CodeUnsupportedCapability:      400,
	CodeUnsupportedTools:           400,
	CodeUnknownTool:                400,
	CodeInvalidSchema:              400,
	CodeIdempotencyUnavailable:     400,
	CodeToolStreamRequired:         400,
	CodeApprovalStreamRequired:     400,
	CodeToolOutputLimit:            400,
	CodeHostStarting:               503,
	CodeHostShuttingDown:           503,
	CodeBusy:                       429,
	CodeQueueFull:                  429,
	CodeRateLimited:                429,
	CodeAdmissionIdentityRequired:  503,
	CodeResourceLimit:              403,
	CodeResourceUsageUnknown:       403,
	CodeResourceAdmissionDenied:    403,
	CodeResourcePolicyUnavailable:  503,
	CodeIdleTimeout:                504,
	CodeTimeout:                    504,
	CodeToolOutcomeUncertain:       409,
	CodeApprovalRequired:           403,
	CodeApprovalDenied:             403,
	CodeInternalError:              500,
	// Idempotency.
	"IDEMPOTENCY_CONFLICT":   409,
	"OPERATION_IN_PROGRESS":  409,
	"OPERATION_UNCERTAIN":    409,
	"OPERATION_STORE_ERROR":  503,
	"OPERATION_STORE_FULL":   503,
	"OPERATION_RECORD_LIMIT": 503,
	// Sessions.
	"SESSION_NOT_FOUND":           404,
	"SESSION_REVISION_CONFLICT":   409,
	"SESSION_BUSY":                409,
	"SESSION_INTERRUPTED":         409,
	"SESSION_PROVIDER_MISMATCH":   409,
	"SESSION_ACCOUNT_CHANGED":     409,
	"SESSION_CAPACITY":            429,
	CodeSessionsUnavailable:       400,
	"INVALID_SESSION":             400,
	"UNSUPPORTED_CONTINUATION":    400,
	"SESSION_ACCOUNT_REQUIRED":    400,
	"SESSION_HISTORY_CONFLICT":    400,
	"SESSION_CONTEXT_UNSUPPORTED": 400,
	"SESSION_CONTEXT_LIMIT":       400,
	"INVALID_SESSION_STATE":       400,
	// Approvals.
	CodeApprovalUnavailable: 400,
	"APPROVAL_POLICY":       400,
	"INVALID_APPROVAL":      400,
	"APPROVAL_NOT_FOUND":    404,
	"APPROVAL_MISMATCH":     409,
	"APPROVAL_CAPACITY":     429,
	"APPROVAL_AUDIT_FAILED": 503,
	// Application tools.
	CodeApplicationToolsUnavail: 400,
	"INVALID_TOOL_EXECUTION":    400,
	"INVALID_TOOL_OUTPUT":       400,
	"TOOL_DEFINITION_LIMIT":     400,
	"TOOL_DEFINITION_CONFLICT":  409,
	"TOOL_EXECUTION_MISMATCH":   409,
	"TOOL_EXECUTION_NOT_FOUND":  404,
	"TOOL_EXECUTOR_CAPACITY":    429,
	// Jobs.
	"JOB_NOT_FOUND":       404,
	"JOB_EXPIRED":         410,
	"JOB_STORE_FULL":      429,
	"JOB_WORKER_BUSY":     429,
	"JOB_EVENT_CONFLICT":  409,
	"JOB_ACCOUNT_CHANGED": 409,
	"JOBS_UNAVAILABLE":    503,
	"JOB_STORE_ERROR":     503,
	"JOB_STORE_CLOSED":    503,
	"JOB_LEASE_LOST":      503,
	// Retrieval / ingestion.
	"INVALID_RETRIEVAL":      400,
	"INVALID_INGESTION":      400,
	"INVALID_DOCUMENT":       400,
	"DOCUMENT_LIMIT":         400,
	"EMPTY_DOCUMENT":         400,
	"EMPTY_EXTRACTION":       400,
	"OCR_REQUIRED":           400,
	"PDF_EXTRACTOR_REQUIRED": 400,
	"PDF_ENCRYPTED":          400,
	"PDF_PERMISSIONS":        400,
	CodeRetrievalUnavailable: 400,
	"NO_RETRIEVAL_EVIDENCE":  400,
	"SOURCE_CONFLICT":        409,
	"CHUNK_CONFLICT":         409,
	"INDEX_INCOMPATIBLE":     409,
	// Delegated auth.
	"AUTH_UNAVAILABLE":    503,
	"INVALID_AUTH_POLICY": 503,
}

// DefaultRetryable is the retryable flag a code carries unless the raiser
// knows better (PROVIDER_ERROR is retryable only for upstream status ≥ 500).
func DefaultRetryable(code Code) bool {
	switch code {
	case CodeHostStarting, CodeHostShuttingDown, CodeBusy, CodeQueueFull,
		CodeRateLimited, CodeIdleTimeout, CodeProviderUnreachable, CodeProviderError,
		"OPERATION_IN_PROGRESS", "JOB_WORKER_BUSY", CodeJobStoreError, CodeApprovalCapacity, CodeToolExecutorCapacity:
		return true
	}
	return false
}

// Message returns the fixed public message of a code. Codes without an
// entry get a generic message that reveals nothing.
func Message(code Code) string {
	if m, ok := messages[code]; ok {
		return m
	}
	return "The request could not be completed."
}

var messages = map[Code]string{
	CodeUnauthorized:               "A valid bearer token is required.",
	CodeForbidden:                  "The token is not allowed to use this provider, tool or resource.",
	CodeOriginDenied:               "This browser origin is not allowed.",
	CodeNotFound:                   "No such endpoint.",
	CodeBodyTooLarge:               "The request body exceeds 1,000,000 bytes.",
	CodeInvalidRequest:             "The request does not match the v1 schema.",
	CodeUnsupportedProtocolVersion: "Only AgenticDriver protocol version 1.0 is supported.",
	CodeUnknownProvider:            "The provider is not configured on this host.",
	CodeUnsupportedModel:           "The model is not allowed for this provider.",
	CodeUnsupportedCapability:      "The selected provider does not support every required capability.",
	CodeUnsupportedTools:           "The selected provider does not support tools.",
	CodeUnknownTool:                "A selected tool is not registered on this host.",
	CodeInvalidSchema:              "The schema is not a usable self-contained JSON Schema.",
	CodeIdempotencyUnavailable:     "Idempotency keys are not supported by this host.",
	CodeToolStreamRequired:         "Application tools require an event stream.",
	CodeApprovalStreamRequired:     "Interactive approvals require an event stream.",
	CodeToolOutputLimit:            "The tool output is not JSON or exceeds 1,000,000 bytes.",
	CodeHostStarting:               "The host is starting.",
	CodeHostShuttingDown:           "The host is shutting down.",
	CodeBusy:                       "No execution slot is available.",
	CodeQueueFull:                  "The waiting queue is full.",
	CodeResourceLimit:              "The run reached its token or cost budget.",
	CodeResourceUsageUnknown:       "The provider did not report the usage the run's budget needs.",
	CodeResourceAdmissionDenied:    "The resource policy does not admit this run.",
	CodeResourcePolicyUnavailable:  "The resource policy is unavailable.",
	CodeRateLimited:                "The provider is rate limiting requests.",
	CodeIdleTimeout:                "The run was idle for longer than its inactivity timeout.",
	CodeTimeout:                    "The operation timed out.",
	CodeCancelled:                  "The run was cancelled.",
	CodeOutputBufferLimit:          "The client did not read events fast enough.",
	CodeStepLimit:                  "The model still requested tools at the step limit.",
	CodeToolLimit:                  "The model requested more than 32 tool calls in one step.",
	CodeToolNotAllowed:             "The model called a tool that is not selected for this run.",
	CodeInvalidToolCall:            "The model produced a tool call with a missing or repeated id.",
	CodeInvalidToolArguments:       "The model produced tool arguments that do not match the tool's input schema.",
	CodeToolFailed:                 "The tool failed.",
	CodeToolOutcomeUncertain:       "The run stopped while a tool's outcome was unconfirmed.",
	CodeApprovalRequired:           "The tool requires an approval that was not granted.",
	CodeApprovalDenied:             "The tool call was denied.",
	CodeApprovalExpired:            "The approval request expired.",
	CodeInvalidOutput:              "The model output is not valid JSON matching the output schema.",
	CodeProviderAuth:               "The provider rejected the host's credentials.",
	CodeProviderUnreachable:        "The provider could not be reached.",
	CodeProviderError:              "The provider returned an error.",
	CodeProviderFailed:             "The provider reported a failure.",
	CodeProviderRefusal:            "The model refused the request.",
	CodeTruncatedToolCall:          "The model's tool call was cut off.",
	CodeInvalidProviderResponse:    "The provider returned a malformed response.",
	CodeInvalidProviderResult:      "The provider adapter returned an invalid result.",
	CodeResponseTooLarge:           "The provider response exceeded its size limit.",
	CodeIncompleteStream:           "The provider stream ended before it was complete.",
	CodeAuthRequired:               "The host has no credentials configured for this provider.",
	CodeProviderExtensionUnavail:   "The provider extension is unavailable.",
	CodeInternalError:              "An internal error occurred.",
	CodeSessionsUnavailable:        "Conversation sessions are not supported by this host.",
	CodeRetrievalUnavailable:       "Retrieval is not supported by this host.",
	CodeApplicationToolsUnavail:    "Application tools are not supported by this host.",
	CodeApprovalUnavailable:        "Interactive approvals are not supported by this host.",
	CodeApprovalPolicy:             "The host does not allow this approval idle policy.",
	CodeInvalidApproval:            "The approval decision does not match the v1 schema.",
	CodeApprovalNotFound:           "No pending approval with this id.",
	CodeApprovalMismatch:           "The decision does not match the pending approval's run or call.",
	CodeApprovalCapacity:           "Too many approvals are pending.",
	CodeApprovalAuditFailed:        "The approval decision could not be recorded.",
	CodeInvalidToolExecution:       "The tool execution submission does not match the v1 schema.",
	CodeInvalidToolOutput:          "The tool output does not match the tool's output schema.",
	CodeToolDefinitionLimit:        "An application tool definition exceeds 128,000 bytes.",
	CodeToolDefinitionConflict:     "An application tool name is repeated or names a host tool.",
	CodeToolExecutionMismatch:      "The submission does not match the execution's run or call.",
	CodeToolExecutionNotFound:      "No pending tool execution with this id.",
	CodeToolExecutorCapacity:       "Too many tool executions are pending.",
	// Durable state.
	CodeIdempotencyConflict:       "The key was already used with a different request.",
	CodeOperationInProgress:       "An operation with this key is still running.",
	CodeOperationUncertain:        "The operation with this key was accepted but its outcome was never recorded.",
	CodeOperationStoreError:       "The operation store did not acknowledge a write.",
	CodeOperationStoreFull:        "The operation store is full.",
	CodeOperationRecordLimit:      "The operation record exceeds its size limit.",
	CodeSessionNotFound:           "The session does not exist.",
	CodeSessionRevisionConflict:   "The session revision is not the current one.",
	CodeSessionBusy:               "A turn of this session is running.",
	CodeSessionInterrupted:        "The previous turn of this session was interrupted.",
	CodeSessionProviderMismatch:   "The provider or model differs from the session's.",
	CodeSessionAccountChanged:     "The provider's account binding changed since the session was created.",
	CodeSessionCapacity:           "The session store is full.",
	CodeInvalidSession:            "The session request does not match the v1 schema.",
	CodeUnsupportedContinuation:   "The provider does not support this continuation mode.",
	CodeSessionAccountRequired:    "Sessions need a provider with an explicit account binding.",
	CodeSessionHistoryConflict:    "A session run cannot carry history or instructions.",
	CodeSessionContextUnsupported: "A session run cannot carry attachments or retrieval.",
	CodeSessionContextLimit:       "The session would exceed its message or size limit.",
	CodeInvalidSessionState:       "The provider's session state cannot be stored.",
	CodeSessionDeleted:            "The session was deleted.",
	CodeJobsUnavailable:           "Durable jobs are not available on this host.",
	CodeInvalidJob:                "The job request does not match the v1 schema.",
	CodeInvalidJobCursor:          "The job event cursor is invalid.",
	CodeJobRequestUnsupported:     "A job request cannot carry session, applicationTools, approvals or idempotencyKey.",
	CodeJobAccountRequired:        "Jobs need a provider with an explicit account binding.",
	CodeJobStoreFull:              "The job store is full.",
	CodeJobNotFound:               "The job does not exist.",
	CodeJobExpired:                "The job's retention has ended.",
	CodeJobStoreError:             "The job store did not acknowledge a write.",
	CodeJobStoreClosed:            "The job store is closed.",
	CodeJobLeaseLost:              "The job worker lost its lease.",
	CodeJobWorkerBusy:             "Another worker owns the job store.",
	CodeJobAccountChanged:         "The provider's account binding changed since the job was submitted.",
	CodeJobEventConflict:          "The job event is out of order or the job is not running.",
	CodeJobRecordLimit:            "A job event or record exceeds its size limit.",
	CodeJobInterrupted:            "The job was interrupted; its outcome is uncertain.",
	CodeContextReplayUnavailable:  "The job's events cannot be replayed until it has completed.",
}
