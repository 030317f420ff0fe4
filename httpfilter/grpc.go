package httpfilter

import (
	"context"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// gRPC metadata keys of the rate-limit values (lower case, as gRPC
// requires): the HTTP header names.
const (
	mdLimit      = "x-ratelimit-limit"
	mdRemaining  = "x-ratelimit-remaining"
	mdReset      = "x-ratelimit-reset"
	mdPolicy     = "ratelimit-policy"
	mdRateLimit  = "ratelimit"
	mdRetryAfter = "retry-after"
)

// UnaryServerInterceptor returns an interceptor enforcing the gRPC SLAs of
// the limits on unary calls, matched by info.FullMethod
// ("/pkg.Service/Method"), the tenant taken from the SLA's metadata key
// (tenant {metadata: key} or {header: name}) or gRPC tenant func.
//
// The rules are those of [Filter]. An admitted call gets the rate-limit
// values as response header metadata (x-ratelimit-limit,
// x-ratelimit-remaining, x-ratelimit-reset, ratelimit-policy, ratelimit:
// the values of the HTTP headers, see [Filter.Middleware]). A refused call
// fails with codes.ResourceExhausted, the same values plus retry-after in
// its trailer metadata, and RetryInfo and QuotaFailure error details. A
// call without a tenant under noTenant: reject, or with a tenant that
// cannot be counted (see [MaxTenantLen]), fails with
// codes.InvalidArgument before anything is charged; a limiter error with
// codes.Unavailable under [WithFailClosed].
func (f *Filter) UnaryServerInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if err := f.checkGRPC(ctx, info.FullMethod, unaryMD{ctx}); err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// StreamServerInterceptor is [Filter.UnaryServerInterceptor] for streams:
// a stream is charged once, when it opens, whatever the number of messages
// it carries.
func (f *Filter) StreamServerInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if err := f.checkGRPC(ss.Context(), info.FullMethod, ss); err != nil {
			return err
		}
		return handler(srv, ss)
	}
}

// mdSetter sends header or trailer metadata: a grpc.ServerStream, or
// unaryMD for a unary call.
type mdSetter interface {
	SetHeader(metadata.MD) error
	SetTrailer(metadata.MD)
}

type unaryMD struct{ ctx context.Context }

func (u unaryMD) SetHeader(md metadata.MD) error { return grpc.SetHeader(u.ctx, md) }
func (u unaryMD) SetTrailer(md metadata.MD)      { _ = grpc.SetTrailer(u.ctx, md) }

// checkGRPC decides one call; a non-nil error refuses it.
func (f *Filter) checkGRPC(ctx context.Context, fullMethod string, out mdSetter) error {
	c := f.current()
	if !c.hasGRPC {
		return nil
	}
	s := f.pool.Get().(*scratch)
	defer f.pool.Put(s)
	ms := c.lim.MatchGRPC(fullMethod, s.matches[:0])
	if len(ms) == 0 {
		return nil
	}
	tenants := s.tenants[:0]
	for i := range ms {
		t, st := c.slas[ms[i].SLA.index].grpcTenant(ctx, fullMethod)
		tenants = append(tenants, tenantResult{t, st})
	}
	o := f.decide(ctx, c, ms, tenants, s)
	switch o.kind {
	case outAllowed:
		_ = out.SetHeader(rateLimitMD(o.values(s.buf[:]), false))
		return nil
	case outDenied:
		out.SetTrailer(rateLimitMD(o.values(s.buf[:]), true))
		return o.grpcStatus().Err()
	case outNoTenant:
		return status.Errorf(codes.InvalidArgument, "rate limit: sla %s: no valid tenant for this call (%s)", o.sla.sla.ID, o.sla.tenantSourceText())
	case outBadTenant:
		return status.Errorf(codes.InvalidArgument, "rate limit: sla %s: invalid tenant id in %s: %s", o.sla.sla.ID, o.sla.tenantSourceText(), o.tst.reason())
	case outError:
		if f.failClosed {
			return status.Error(codes.Unavailable, "rate limit: the rate limiter failed")
		}
	}
	return nil
}

func rateLimitMD(blk *hdrBlock, denied bool) metadata.MD {
	v := &blk.v
	md := metadata.MD{
		mdLimit:     {v[vLimit]},
		mdRemaining: {v[vRemaining]},
		mdReset:     {v[vReset]},
		mdPolicy:    {v[vPolicy]},
		mdRateLimit: {v[vRateLimit]},
	}
	if denied {
		md[mdRetryAfter] = []string{v[vRetryAfter]}
	}
	return md
}

// grpcStatus is the ResourceExhausted status of a denied call.
func (o *outcome) grpcStatus() *status.Status {
	ts, i := o.ref.ts, o.ref.i
	retry := max(ceilSeconds(o.d.RetryAfter), 1)
	msg := "rate limit: sla " + o.ref.cs.sla.ID + ": quota of " + ts.limitStr[i] + " per " + ts.pnames[i] +
		" exhausted; retry after " + time.Duration(retry*int64(time.Second)).String()
	st := status.New(codes.ResourceExhausted, msg)
	if ds, err := st.WithDetails(
		&errdetails.RetryInfo{RetryDelay: durationpb.New(time.Duration(retry) * time.Second)},
		&errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{{
			Subject:     o.ref.cs.sla.ID,
			Description: "policy " + ts.names[i] + ": " + ts.limitStr[i] + " per " + ts.pnames[i],
		}}},
	); err == nil {
		st = ds
	}
	return st
}

// grpcTenant resolves the tenant of a gRPC call for this SLA.
func (cs *compiledSLA) grpcTenant(ctx context.Context, fullMethod string) (string, tenantStatus) {
	var t string
	switch cs.sla.Tenant.Kind {
	case TenantNone:
		return SharedTenant, tenantOK
	case TenantHeader, TenantMetadata:
		if v := metadata.ValueFromIncomingContext(ctx, cs.sla.Tenant.Key); len(v) > 0 {
			t = v[0]
		}
	case TenantFunc:
		var ok bool
		if t, ok = cs.grpcFunc(ctx, fullMethod); !ok {
			return "", tenantMissing
		}
	default:
		return "", tenantMissing
	}
	return t, checkTenant(t)
}
