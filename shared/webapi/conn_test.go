package webapi

import (
	"context"
	"errors"

	"google.golang.org/grpc"
)

// noConn is a connection for tests that make no calls.
type noConn struct{}

func (noConn) Invoke(context.Context, string, any, any, ...grpc.CallOption) error {
	return errors.New("noConn")
}

func (noConn) NewStream(context.Context, *grpc.StreamDesc, string, ...grpc.CallOption) (grpc.ClientStream, error) {
	return nil, errors.New("noConn")
}
