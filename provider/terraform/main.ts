// terraform-provider-edgeform: a go-plugin server speaking tfplugin6 over gRPC. Terraform
// starts it, reads one handshake line from stdout, and talks TLS to the address in it.
// Nothing else may ever be written to stdout; logs go to stderr (shown with TF_LOG).
import * as grpc from '@grpc/grpc-js';
import { fromJSON } from '@grpc/proto-loader';
import protobuf from 'protobufjs';
import pluginProto from './proto/plugin.proto';
import tfplugin6Proto from './proto/tfplugin6.proto';
import { makePluginCert } from './plugin-cert.js';
import { providerService } from './rpc.js';

declare const PROVIDER_VERSION: string;

const MAGIC_COOKIE_KEY = 'TF_PLUGIN_MAGIC_COOKIE';
const MAGIC_COOKIE = 'd602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2';

const log = (line: string) => process.stderr.write(`[edgeform] ${line}\n`);

function fail(message: string): never {
  process.stderr.write(`${message}\n`);
  process.exit(1);
}

if (process.env[MAGIC_COOKIE_KEY] !== MAGIC_COOKIE) {
  fail('This binary is a Terraform plugin. It is not meant to be run directly; Terraform starts it (see the README for the CLI configuration).');
}
const versions = (process.env.PLUGIN_PROTOCOL_VERSIONS ?? '6').split(',').map((v) => v.trim());
if (!versions.includes('6')) fail(`terraform offered plugin protocol versions ${versions.join(',')}; this provider speaks 6 (terraform 1.0 or newer)`);

// Ctrl-C reaches the whole process group; terraform answers it with StopProvider and lets
// calls in flight finish, so dying here would lose resources an apply just created.
process.on('SIGINT', () => {});

const root = new protobuf.Root();
protobuf.parse(tfplugin6Proto, root, { keepCase: true });
protobuf.parse(pluginProto, root, { keepCase: true });
const definitions = grpc.loadPackageDefinition(fromJSON(root.toJSON(), { keepCase: true, longs: Number, enums: String, defaults: true, oneofs: true })) as any;

type Handler = (request: any) => unknown;
function unary(name: string, fn: Handler): grpc.handleUnaryCall<any, any> {
  return (call, callback) => {
    Promise.resolve()
      .then(() => fn(call.request))
      .then(
        (reply) => callback(null, reply),
        (e: Error) => {
          log(`${name} failed: ${e.stack ?? e}`);
          callback({ code: grpc.status.INTERNAL, details: `${name}: ${e.message}` });
        },
      );
  };
}

const server = new grpc.Server();
const provider = providerService({ version: typeof PROVIDER_VERSION === 'string' ? PROVIDER_VERSION : 'dev', env: process.env, log });
server.addService(
  definitions.tfplugin6.Provider.service,
  Object.fromEntries(Object.entries(provider).map(([name, fn]) => [name, unary(name, fn as Handler)])),
);
server.addService(definitions.plugin.GRPCController.service, {
  // Terraform calls this at the end of every provider process and kills it 2 s later.
  Shutdown: unary('Shutdown', () => {
    // Let the reply go out first; exit at the latest a little later.
    setImmediate(() => server.tryShutdown(() => process.exit(0)));
    setTimeout(() => process.exit(0), 300).unref();
    return {};
  }),
});

// AutoMTLS: terraform passes its client certificate and trusts only the one we print.
const clientCert = process.env.PLUGIN_CLIENT_CERT;
let credentials = grpc.ServerCredentials.createInsecure();
let certField = '';
if (clientCert) {
  const cert = makePluginCert();
  credentials = grpc.ServerCredentials.createSsl(Buffer.from(clientCert), [{ private_key: Buffer.from(cert.keyPem), cert_chain: Buffer.from(cert.certPem) }], true);
  certField = cert.handshakeField;
}

server.bindAsync('127.0.0.1:0', credentials, (err, port) => {
  if (err) fail(`cannot listen on 127.0.0.1: ${err.message}`);
  process.stdout.write(`1|6|tcp|127.0.0.1:${port}|grpc|${certField}\n`);
});
