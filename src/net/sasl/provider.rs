//! An async function the application hands a client for its credentials (OAUTHBEARER tokens,
//! AWS credentials), called at every authentication by any of the client's connections. The
//! public provider types wrap it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// What a provider's function returns: the value, or why there is none.
pub(crate) type Provided<T> = Pin<Box<dyn Future<Output = Result<T, String>> + Send>>;

/// The function, shared. Two are equal when they are the same function object, so that
/// configurations built from the same provider compare equal.
pub(crate) struct AsyncProvider<T>(Arc<dyn Fn() -> Provided<T> + Send + Sync>);

impl<T> AsyncProvider<T> {
    pub(crate) fn new<F, Fut>(provide: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<T, String>> + Send + 'static,
    {
        AsyncProvider(Arc::new(move || Box::pin(provide())))
    }

    /// Asks for a value.
    pub(crate) fn provide(&self) -> Provided<T> {
        (self.0)()
    }
}

// By hand: a derive would ask `T: Clone` / `T: PartialEq` of the value, which the shared
// function does not need.
impl<T> Clone for AsyncProvider<T> {
    fn clone(&self) -> Self {
        AsyncProvider(Arc::clone(&self.0))
    }
}

impl<T> PartialEq for AsyncProvider<T> {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl<T> Eq for AsyncProvider<T> {}
