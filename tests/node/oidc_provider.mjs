// A real OAuth 2.1 authorization server for mcpgw's end-to-end tests: the oidc-provider package
// (a certified OpenID provider) configured as the authorization server of the gateway's MCP
// endpoint and of the upstreams it calls on a user's behalf.
//
//   node tests/node/oidc_provider.mjs CONFIG.json
//
// It listens on 127.0.0.1, prints exactly one line on stdout once it serves requests,
//
//   {"issuer": "http://127.0.0.1:PORT"}
//
// and writes everything else (one line per token-endpoint grant, per interaction, warnings) to
// stderr. It exits on SIGTERM, SIGINT or SIGHUP, and when its stdin reaches end of file if stdin
// is a pipe or a socket: a test harness that keeps the write end of a piped stdin and dies closes
// it, so the provider never outlives its test. (A stdin that is /dev/null or a terminal is not
// watched: then only a signal stops it.)
//
// CONFIG.json:
//
//   {
//     "port": 0,                        0 (or absent) = a free port
//     "accounts": {                     the users; the key is the account id, the token's "sub"
//       "alice": {"groups": ["ops"], "tenant_id": "acme"},
//       "bob": {"groups": []}
//     },
//     "resources": [                    the resource servers tokens can be issued for
//       {"uri": "http://127.0.0.1:8123/mcp",     the resource indicator, matched exactly; the
//                                                tokens' "aud"
//        "scopes": "mcp:tools mcp:admin",        the scopes this resource knows (space-separated)
//        "access_token_ttl_s": 600},             lifetime of its access tokens (default 600)
//       {"uri": "http://upstream.test/mcp", "scopes": "upstream:read"}
//     ],
//     "default_resource": null,         optional: the resource used when a request names none
//     "id_token_claims": false,         optional: true puts the claims of the granted OpenID
//                                       scopes ("groups") in the ID token as well (see below)
//     "client_auth_methods": null,      optional: the token endpoint's client authentication
//                                       methods, e.g. ["client_secret_post", "none"]; default
//                                       all that oidc-provider knows (client_secret_basic first).
//                                       Without client_secret_basic, a token request with HTTP
//                                       Basic credentials gets invalid_client.
//     "clients": [                      statically registered clients (oidc-provider's client
//       {"client_id": "mcpgw",          metadata, passed as given)
//        "client_secret": "s3cret",
//        "grant_types": ["urn:ietf:params:oauth:grant-type:token-exchange", "client_credentials"],
//        "redirect_uris": [], "response_types": [],
//        "token_endpoint_auth_method": "client_secret_post"}
//     ]
//   }
//
// What it serves (the discovery documents list every endpoint):
// - /.well-known/oauth-authorization-server and /.well-known/openid-configuration, /jwks (a
//   fresh RS256 key made at start), /auth (authorization), /token, /reg (registration), /me.
// - Open dynamic client registration (no initial access token). Confidential and public
//   (token_endpoint_auth_method "none") clients; native clients (application_type "native",
//   what the MCP SDKs send) may use http loopback redirect URIs (127.0.0.1, [::1], localhost),
//   and any port of such a URI matches the registered one. The "scope" member of a client's
//   metadata is dropped: a client is not limited to a scope list, what a token carries is
//   limited by the resource's scopes instead (oidc-provider would otherwise refuse a
//   registration naming resource scopes such as "mcp:tools").
// - The authorization code grant, PKCE S256 required for every client.
// - OpenID Connect sign-in (scope "openid"): an ID token (RS256, "aud" = the client id, the
//   request's "nonce") and the userinfo endpoint /me. The OpenID scope "groups" releases the
//   account's "groups" ([] when it has none) and "tenant_id" (when it has one). They are
//   answered by /me; the ID token of the code flow carries only "sub" unless "id_token_claims"
//   is true, when it carries them too.
// - Resource indicators (RFC 8707): a listed resource gets a JWT access token (typ at+jwt, RS256)
//   with "aud" = the resource URI, "scope" = the granted scopes of that resource, "sub" = the
//   account id, "iss", "iat", "exp", "jti", "client_id", "groups" (the account's, [] when it has
//   none) and "tenant_id" (when the account has one). A resource that is not listed is refused
//   with invalid_target. A token request that names no resource gets the resource named at
//   authorization. A request that names no resource at all is treated as naming
//   "default_resource" when the config sets one. Without it, such an authorization request can
//   only be granted OpenID scopes: asking for resource scopes alone ends in access_denied (no
//   scope was granted), and with "openid" it gets an opaque access token good only at this
//   server's userinfo endpoint (no "aud"), which no resource server accepts.
// - Refresh tokens for clients registered with the refresh_token grant that asked for
//   offline_access with prompt=consent (the OpenID rule; the MCP SDKs send both). A refresh
//   that names no resource keeps the granted one.
// - No login or consent page: /interaction/UID finishes each step at once. The user is the
//   account named by the authorization request's login_hint (alice when absent); an unknown
//   account ends the request with access_denied. Consent grants every requested scope that the
//   requested resource knows, and every requested OpenID scope (openid, offline_access,
//   groups). A browser (cookie jar) signs in once: while its session lasts, later requests are
//   that user's whatever their login_hint says, so use a fresh cookie jar for each user.
// - Token exchange (RFC 8693, grant type urn:ietf:params:oauth:grant-type:token-exchange), for
//   an authenticated client registered with that grant type: subject_token (a valid, unexpired
//   access token JWT this server issued), subject_token_type
//   urn:ietf:params:oauth:token-type:access_token, the target as resource and/or audience (a
//   listed resource URI; both must agree when both are sent), scope (optional, within the
//   target's scopes; default all of them). The answer's access token is a JWT for the target
//   with the subject token's "sub", "groups" and "tenant_id" and "act": {"sub": CLIENT_ID}.
// - The client credentials grant, for clients registered with it (the token's "sub" is the
//   client id; ask for a scope, none is granted by default).
// - A client that uses a grant type it is not registered for gets unauthorized_client.

import { generateKeyPairSync, randomBytes, randomUUID } from 'node:crypto';
import { fstatSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';

import { createLocalJWKSet, jwtVerify } from 'jose';
import Provider, { errors } from 'oidc-provider';

const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';
const DEFAULT_TTL_S = 600;
const DEFAULT_LOGIN = 'alice';

// oidc-provider prints its notices with console.info: stdout belongs to the ready line alone.
console.log = console.error;
console.info = console.error;

function log(line) {
  process.stderr.write(`oidc-provider: ${line}\n`);
}

function die(message) {
  process.stderr.write(`oidc-provider: ${message}\n`);
  process.exit(2);
}

// --- The configuration -----------------------------------------------------------------------

function readConfig(path) {
  if (!path) {
    die('usage: oidc_provider.mjs CONFIG.json');
  }
  let config;
  try {
    config = JSON.parse(readFileSync(path, 'utf8'));
  } catch (error) {
    die(`cannot read the config ${path}: ${error.message}`);
  }
  if (config === null || typeof config !== 'object' || Array.isArray(config)) {
    die('the config must be a JSON object');
  }

  const port = config.port ?? 0;
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    die(`"port" must be an integer from 0 to 65535, got ${JSON.stringify(config.port)}`);
  }

  const accounts = new Map();
  for (const [id, account] of Object.entries(config.accounts ?? {})) {
    if (account === null || typeof account !== 'object' || Array.isArray(account)) {
      die(`account ${id} must be an object`);
    }
    const groups = account.groups ?? [];
    if (!Array.isArray(groups) || groups.some((group) => typeof group !== 'string')) {
      die(`account ${id}: "groups" must be an array of strings`);
    }
    if (account.tenant_id !== undefined && typeof account.tenant_id !== 'string') {
      die(`account ${id}: "tenant_id" must be a string`);
    }
    accounts.set(id, { groups, tenantId: account.tenant_id });
  }

  const resources = new Map();
  for (const resource of config.resources ?? []) {
    if (typeof resource?.uri !== 'string' || !URL.canParse(resource.uri)) {
      die(`every resource needs an absolute "uri", got ${JSON.stringify(resource)}`);
    }
    if (typeof resource.scopes !== 'string') {
      die(`resource ${resource.uri}: "scopes" must be a space-separated string`);
    }
    const ttl = resource.access_token_ttl_s ?? DEFAULT_TTL_S;
    if (!Number.isInteger(ttl) || ttl <= 0) {
      die(`resource ${resource.uri}: "access_token_ttl_s" must be a positive integer`);
    }
    resources.set(resource.uri, {
      scopes: resource.scopes.split(' ').filter(Boolean),
      ttl,
    });
  }

  const defaultResource = config.default_resource ?? undefined;
  if (defaultResource !== undefined && !resources.has(defaultResource)) {
    die(`"default_resource" must be one of the listed resources, got ${JSON.stringify(defaultResource)}`);
  }

  const clients = config.clients ?? [];
  if (!Array.isArray(clients)) {
    die('"clients" must be an array');
  }

  const idTokenClaims = config.id_token_claims ?? false;
  if (typeof idTokenClaims !== 'boolean') {
    die(`"id_token_claims" must be true or false, got ${JSON.stringify(config.id_token_claims)}`);
  }

  const clientAuthMethods = config.client_auth_methods ?? undefined;
  if (clientAuthMethods !== undefined
    && (!Array.isArray(clientAuthMethods) || !clientAuthMethods.length
      || clientAuthMethods.some((method) => typeof method !== 'string'))) {
    die(`"client_auth_methods" must be a non-empty array of strings, got ${JSON.stringify(config.client_auth_methods)}`);
  }

  return { port, accounts, resources, defaultResource, clients, idTokenClaims, clientAuthMethods };
}

// --- Helpers of the provider's configuration -------------------------------------------------

// The claims a user's access tokens carry besides the standard ones.
function accountClaims(account) {
  return {
    groups: [...account.groups],
    ...(account.tenantId !== undefined ? { tenant_id: account.tenantId } : undefined),
  };
}

// What oidc-provider needs to know of a listed resource: JWT access tokens, signed with the
// provider's RS256 key, for the resource URI as audience.
function resourceServerInfo(resources, uri) {
  const resource = resources.get(uri);
  if (!resource) {
    throw new errors.InvalidTarget(`${uri} is not a resource of this authorization server`);
  }
  return {
    audience: uri,
    scope: resource.scopes.join(' '),
    accessTokenTTL: resource.ttl,
    accessTokenFormat: 'jwt',
    jwt: { sign: { alg: 'RS256' } },
  };
}

// A fresh RSA key pair: the private JWK signs, the public one checks subject tokens.
function signingKeys() {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const kid = randomUUID();
  const common = { kid, alg: 'RS256', use: 'sig' };
  return {
    privateJwk: { ...privateKey.export({ format: 'jwk' }), ...common },
    publicJwk: { ...publicKey.export({ format: 'jwk' }), ...common },
  };
}

// RFC 6749 5.2 calls a grant the client may not use unauthorized_client; oidc-provider answers
// invalid_request with this description.
const GRANT_NOT_ALLOWED = 'requested grant type is not allowed for this client';

function asRfcGrantError(body) {
  if (body?.error === 'invalid_request' && body.error_description === GRANT_NOT_ALLOWED) {
    body.error = 'unauthorized_client';
  }
  return body;
}

// --- Token exchange (RFC 8693) ---------------------------------------------------------------

function tokenExchangeGrant(provider, issuer, resources, publicKeys, exchangedClaims) {
  const subjectTokenKeys = createLocalJWKSet(publicKeys);

  return async function tokenExchange(ctx) {
    const { client, params } = ctx.oidc;

    if (client.clientAuthMethod === 'none') {
      throw new errors.UnauthorizedClient('token exchange is only for clients that authenticate');
    }
    if (!params.subject_token) {
      throw new errors.InvalidRequest('missing required parameter subject_token');
    }
    if (params.subject_token_type !== ACCESS_TOKEN_TYPE) {
      throw new errors.InvalidRequest(`subject_token_type must be ${ACCESS_TOKEN_TYPE}`);
    }
    if (params.requested_token_type !== undefined && params.requested_token_type !== ACCESS_TOKEN_TYPE) {
      throw new errors.InvalidRequest(`requested_token_type must be ${ACCESS_TOKEN_TYPE}`);
    }

    if (!params.resource && !params.audience) {
      throw new errors.InvalidRequest('name the target resource with resource or audience');
    }
    if (params.resource && params.audience && params.resource !== params.audience) {
      throw new errors.InvalidTarget('resource and audience name different targets');
    }
    const target = params.resource || params.audience;
    const info = resourceServerInfo(resources, target);

    const targetScopes = info.scope.split(' ').filter(Boolean);
    let scopes = targetScopes;
    if (params.scope) {
      scopes = [...new Set(params.scope.split(' ').filter(Boolean))];
      const unknown = scopes.filter((scope) => !targetScopes.includes(scope));
      if (unknown.length) {
        throw new errors.InvalidScope(`${target} has no scope ${unknown.join(' ')}`, unknown.join(' '));
      }
    }

    let subject;
    try {
      ({ payload: subject } = await jwtVerify(params.subject_token, subjectTokenKeys, {
        issuer,
        typ: 'at+jwt',
        algorithms: ['RS256'],
        requiredClaims: ['sub', 'exp'],
      }));
    } catch (error) {
      throw new errors.CustomOIDCProviderError('invalid_grant', `subject_token is not a valid access token of this server: ${error.message}`);
    }

    const token = new provider.AccessToken({
      accountId: subject.sub,
      client,
      scope: scopes.join(' ') || undefined,
      gty: 'token_exchange',
    });
    token.resourceServer = new provider.ResourceServer(target, info);
    exchangedClaims.set(token, {
      groups: Array.isArray(subject.groups) ? subject.groups : [],
      ...(typeof subject.tenant_id === 'string' ? { tenant_id: subject.tenant_id } : undefined),
      act: { sub: client.clientId },
    });

    ctx.oidc.entity('AccessToken', token);
    const value = await token.save();

    ctx.body = {
      access_token: value,
      issued_token_type: ACCESS_TOKEN_TYPE,
      token_type: 'Bearer',
      expires_in: token.expiration,
      scope: token.scope,
    };
  };
}

// --- Interactions: login and consent without a page ------------------------------------------

async function finishInteraction(provider, accounts, req, res) {
  const details = await provider.interactionDetails(req, res);
  const { uid, prompt, params, session } = details;

  if (prompt.name === 'login') {
    const login = params.login_hint || DEFAULT_LOGIN;
    if (!accounts.has(login)) {
      log(`interaction ${uid}: login ${login} refused, no such account`);
      await provider.interactionFinished(req, res, {
        error: 'access_denied',
        error_description: `no account named ${login}`,
      }, { mergeWithLastSubmission: false });
      return;
    }
    log(`interaction ${uid}: login ${login} (client ${params.client_id})`);
    await provider.interactionFinished(req, res, { login: { accountId: login } }, { mergeWithLastSubmission: false });
    return;
  }

  if (prompt.name === 'consent') {
    const grant = details.grantId
      ? await provider.Grant.find(details.grantId)
      : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
    const { missingOIDCScope, missingOIDCClaims, missingResourceScopes } = prompt.details;
    if (missingOIDCScope) {
      grant.addOIDCScope(missingOIDCScope.join(' '));
    }
    if (missingOIDCClaims) {
      grant.addOIDCClaims(missingOIDCClaims);
    }
    const granted = [];
    for (const [indicator, scopes] of Object.entries(missingResourceScopes ?? {})) {
      grant.addResourceScope(indicator, scopes.join(' '));
      granted.push(`${indicator} [${scopes.join(' ')}]`);
    }
    const grantId = await grant.save();
    log(`interaction ${uid}: consent of ${session.accountId} for client ${params.client_id}: `
      + `openid scopes [${(missingOIDCScope ?? []).join(' ')}], resources ${granted.join(', ') || 'none'}`);
    await provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
    return;
  }

  log(`interaction ${uid}: prompt ${prompt.name} is not handled`);
  await provider.interactionFinished(req, res, {
    error: 'access_denied',
    error_description: `prompt ${prompt.name} is not supported`,
  }, { mergeWithLastSubmission: false });
}

// --- Start -----------------------------------------------------------------------------------

async function main() {
  const config = readConfig(process.argv[2]);
  const { accounts, resources } = config;

  // Listen first: the issuer names the port, which is known once bound.
  let handle = (_req, res) => {
    res.statusCode = 503;
    res.end();
  };
  const server = createServer((req, res) => handle(req, res));
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, '127.0.0.1', resolve);
  });
  const issuer = `http://127.0.0.1:${server.address().port}`;

  const { privateJwk, publicJwk } = signingKeys();
  // Tokens minted by the token exchange and the claims they carry on top of the standard ones.
  const exchangedClaims = new WeakMap();

  const resourceTtl = (_ctx, token) => token.resourceServer?.accessTokenTTL ?? DEFAULT_TTL_S;

  const provider = new Provider(issuer, {
    clients: config.clients,
    jwks: { keys: [privateJwk] },
    cookies: { keys: [randomBytes(32).toString('base64url')] },
    pkce: { required: () => true },
    // OAuth 2.1: the authorization code is the only response type (no implicit flow).
    responseTypes: ['code'],
    scopes: ['openid', 'offline_access'],
    // The claims each OpenID scope releases (the first four are oidc-provider's defaults).
    claims: {
      acr: null,
      sid: null,
      auth_time: null,
      iss: null,
      openid: ['sub'],
      groups: ['groups', 'tenant_id'],
    },
    conformIdTokenClaims: !config.idTokenClaims,
    ...(config.clientAuthMethods ? { clientAuthMethods: config.clientAuthMethods } : undefined),
    async findAccount(_ctx, sub) {
      const account = accounts.get(sub);
      if (!account) {
        return undefined;
      }
      return {
        accountId: sub,
        async claims() {
          return { sub, ...accountClaims(account) };
        },
      };
    },
    async extraTokenClaims(_ctx, token) {
      const exchanged = exchangedClaims.get(token);
      if (exchanged) {
        return exchanged;
      }
      const account = token.accountId ? accounts.get(token.accountId) : undefined;
      return account ? accountClaims(account) : undefined;
    },
    // Registration metadata may carry the scopes a client means to ask for; resource scopes are
    // none of the provider's own, so the member is dropped rather than the client refused.
    extraClientMetadata: {
      properties: ['scope'],
      validator(_ctx, key, _value, metadata) {
        if (key === 'scope') {
          delete metadata.scope;
        }
      },
    },
    interactions: {
      url: (_ctx, interaction) => `/interaction/${interaction.uid}`,
    },
    features: {
      devInteractions: { enabled: false },
      registration: { enabled: true, initialAccessToken: false },
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        async defaultResource(_ctx, _client, oneOf) {
          return oneOf ?? config.defaultResource;
        },
        useGrantedResource: async () => true,
        async getResourceServerInfo(_ctx, indicator) {
          return resourceServerInfo(resources, indicator);
        },
      },
    },
    ttl: {
      AccessToken: resourceTtl,
      ClientCredentials: resourceTtl,
      AuthorizationCode: 60,
      IdToken: 3600,
      RefreshToken: 24 * 3600,
      Interaction: 600,
      Session: 3600,
      Grant: 24 * 3600,
    },
  });

  provider.registerGrantType(
    TOKEN_EXCHANGE,
    tokenExchangeGrant(provider, issuer, resources, { keys: [publicJwk] }, exchangedClaims),
    ['subject_token', 'subject_token_type', 'requested_token_type', 'resource', 'audience', 'scope'],
  );

  // The static clients are checked now, not at their first request.
  for (const { client_id: id } of config.clients) {
    try {
      await provider.Client.find(id);
    } catch (error) {
      die(`client ${id}: ${error.error_description ?? error.message}`);
    }
  }

  // After each token-endpoint request: a grant the client is not registered for is answered as
  // unauthorized_client, and one stderr line tells which grant, which client, which resource and
  // what came of it; never a token.
  const tokenRoute = new URL(provider.urlFor('token')).pathname;
  provider.use(async (ctx, next) => {
    await next();
    if (ctx.path !== tokenRoute || ctx.method !== 'POST') {
      return;
    }
    const { params, client, entities } = ctx.oidc ?? {};
    const body = asRfcGrantError(ctx.body);
    const issued = entities?.AccessToken ?? entities?.ClientCredentials;
    const fields = [
      `grant ${params?.grant_type ?? '-'}`,
      `client ${client?.clientId ?? params?.client_id ?? '-'}`,
      `resource ${params?.resource ?? params?.audience ?? '-'}`,
      `status ${ctx.status}`,
    ];
    if (issued) {
      fields.push(`issued aud ${issued.aud ?? '(none: userinfo only)'} scope [${issued.scope ?? ''}]`);
    }
    if (body?.error) {
      fields.push(`error ${body.error}${body.error_description ? ` (${body.error_description})` : ''}`);
    }
    log(`token: ${fields.join(', ')}`);
  });

  // oidc-provider takes HTTP Basic client credentials whatever it lists; a server configured
  // without client_secret_basic refuses them, as a provider that lists only client_secret_post
  // may.
  if (config.clientAuthMethods && !config.clientAuthMethods.includes('client_secret_basic')) {
    provider.use(async (ctx, next) => {
      if (ctx.path === tokenRoute && ctx.method === 'POST' && /^basic /i.test(ctx.get('authorization'))) {
        ctx.status = 401;
        ctx.body = {
          error: 'invalid_client',
          error_description: 'client_secret_basic is not accepted here: send the client secret in the request body',
        };
        return;
      }
      await next();
    });
  }

  const providerCallback = provider.callback();
  handle = (req, res) => {
    const { pathname } = new URL(req.url, issuer);
    if (req.method === 'GET' && /^\/interaction\/[^/]+$/.test(pathname)) {
      finishInteraction(provider, accounts, req, res).catch((error) => {
        log(`interaction failed: ${error.name}: ${error.message}`);
        if (!res.headersSent) {
          res.statusCode = error.statusCode ?? 500;
          res.setHeader('Content-Type', 'application/json');
          res.end(JSON.stringify({ error: error.error ?? 'server_error', error_description: error.error_description ?? error.message }));
        }
      });
      return;
    }
    providerCallback(req, res);
  };

  const stop = (why) => {
    log(`stopping (${why})`);
    server.close();
    server.closeAllConnections();
    process.exit(0);
  };
  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP']) {
    process.on(signal, () => stop(signal));
  }
  const stdin = fstatSync(0);
  if (stdin.isFIFO() || stdin.isSocket()) {
    process.stdin.on('end', () => stop('stdin closed'));
    process.stdin.on('error', () => stop('stdin closed'));
    process.stdin.resume();
  }

  log(`serving ${issuer}: resources ${[...resources.keys()].join(', ') || 'none'}; `
    + `accounts ${[...accounts.keys()].join(', ') || 'none'}; `
    + `static clients ${config.clients.map((client) => client.client_id).join(', ') || 'none'}`);
  process.stdout.write(`{"issuer": ${JSON.stringify(issuer)}}\n`);
}

main().catch((error) => {
  process.stderr.write(`oidc-provider: failed to start: ${error.stack ?? error}\n`);
  process.exit(1);
});
