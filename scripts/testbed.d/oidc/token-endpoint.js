// The test bed's OAuth 2.0 identity provider, for the OIDC listener (KIP-768): a token
// endpoint with the client-credentials grant (RFC 6749 §4.4) that signs RS256 JWTs, and the
// JWKS the brokers' OAuthBearerValidatorCallbackHandler checks them with (read from a file).
// Node's standard library only. Loopback only; the client and its secret are test values.
//
//   node token-endpoint.js keys DIR         make DIR/signing-key.pem and DIR/jwks.json (once)
//   node token-endpoint.js serve DIR PORT   answer on 127.0.0.1:PORT
//
// POST /token[?lifetime=S][&label=L]: a token valid S seconds (default 3600) for a known client
//   (HTTP Basic or client_id/client_secret in the body), or 401 invalid_client; L names the
//   caller in the counts.
// GET /issued?label=L: {"issued": N}, how many tokens were given under label L.
'use strict';
const crypto = require('crypto');
const fs = require('fs');
const http = require('http');
const path = require('path');

const ISSUER = 'exactly-testbed';
const KEY_ID = 'testbed-1';
const CLIENTS = { 'exactly-client': 'exactly-client-secret' };

function keys(dir) {
  const keyFile = path.join(dir, 'signing-key.pem');
  if (fs.existsSync(keyFile)) return;
  fs.mkdirSync(dir, { recursive: true });
  const { privateKey, publicKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
  const jwk = publicKey.export({ format: 'jwk' });
  const jwks = { keys: [{ ...jwk, kid: KEY_ID, alg: 'RS256', use: 'sig' }] };
  fs.writeFileSync(path.join(dir, 'jwks.json'), JSON.stringify(jwks));
  fs.writeFileSync(keyFile, privateKey.export({ format: 'pem', type: 'pkcs8' }), { mode: 0o600 });
}

const b64url = (data) => Buffer.from(data).toString('base64url');

function sign(key, claims) {
  const header = b64url(JSON.stringify({ alg: 'RS256', typ: 'JWT', kid: KEY_ID }));
  const body = b64url(JSON.stringify(claims));
  const signature = crypto.sign('sha256', Buffer.from(`${header}.${body}`), key);
  return `${header}.${body}.${signature.toString('base64url')}`;
}

// The client's id and secret: HTTP Basic (form-encoded inside, RFC 6749 §2.3.1) or the body.
function credentials(req, form) {
  const auth = req.headers.authorization || '';
  if (auth.startsWith('Basic ')) {
    const decoded = Buffer.from(auth.slice(6), 'base64').toString();
    const at = decoded.indexOf(':');
    // Form-decoded (RFC 6749 §2.3.1) when that reads, else as sent (Java's default).
    const unform = (s) => {
      try {
        return decodeURIComponent(s.replace(/\+/g, ' '));
      } catch (e) {
        return s;
      }
    };
    return [unform(decoded.slice(0, at)), unform(decoded.slice(at + 1))];
  }
  return [form.get('client_id'), form.get('client_secret')];
}

function serve(dir, port) {
  const key = crypto.createPrivateKey(fs.readFileSync(path.join(dir, 'signing-key.pem')));
  const issued = new Map();
  const reply = (res, status, body) => {
    res.writeHead(status, { 'Content-Type': 'application/json', 'Cache-Control': 'no-store' });
    res.end(JSON.stringify(body));
  };
  http
    .createServer((req, res) => {
      const url = new URL(req.url, 'http://127.0.0.1');
      const label = url.searchParams.get('label') || '';
      if (req.method === 'GET' && url.pathname === '/issued') {
        return reply(res, 200, { issued: issued.get(label) || 0 });
      }
      if (req.method !== 'POST' || url.pathname !== '/token') {
        return reply(res, 404, { error: 'not_found' });
      }
      let text = '';
      req.on('data', (chunk) => {
        text += chunk;
        if (text.length > 65536) req.destroy();
      });
      req.on('end', () => {
        const form = new URLSearchParams(text);
        if (form.get('grant_type') !== 'client_credentials') {
          return reply(res, 400, { error: 'unsupported_grant_type' });
        }
        const [id, secret] = credentials(req, form);
        if (!id || CLIENTS[id] === undefined || CLIENTS[id] !== secret) {
          return reply(res, 401, { error: 'invalid_client', error_description: 'unknown client or wrong secret' });
        }
        const lifetime = Math.max(1, Number(url.searchParams.get('lifetime') || 3600));
        const now = Math.floor(Date.now() / 1000);
        const scope = form.get('scope') || 'kafka';
        const token = sign(key, { iss: ISSUER, sub: id, aud: 'kafka', iat: now, exp: now + lifetime, scope });
        issued.set(label, (issued.get(label) || 0) + 1);
        reply(res, 200, { access_token: token, token_type: 'Bearer', expires_in: lifetime, scope });
      });
    })
    .listen(port, '127.0.0.1');
}

const [command, dir, port] = process.argv.slice(2);
if (command === 'keys' && dir) keys(dir);
else if (command === 'serve' && dir && port) serve(dir, Number(port));
else {
  console.error('usage: token-endpoint.js keys DIR | serve DIR PORT');
  process.exit(2);
}
