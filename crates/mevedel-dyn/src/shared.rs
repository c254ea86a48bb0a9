//! Shared whiteboards (`mevedel_core::shared`): a user-pointer handle per
//! board; its page host's changes arrive as `shared-changed`,
//! `shared-comment` and `shared-pages` events. The scene crosses as the
//! Excalidraw JSON it is, and SharedEdit's operations as the model's
//! JSON arguments.

use std::cell::Ref;

use emacs::{Env, IntoLisp, Result, Value, defun};
use mevedel_core::shared::Board;

use crate::args::Plist;
use crate::convert::to_lisp;
use crate::errors::OrSignal;
use crate::guard::guarded;

fn board_of<'e>(handle: Value<'e>) -> Result<Ref<'e, Board>> {
    handle.into_ref::<Board>()
}

/// Open a board and return its handle. ARGS: `:id` (the board's id),
/// `:key` (the string its events carry; default the id) and `:scene`
/// (Excalidraw scene JSON to start from, or nil for an empty board).
#[defun(user_ptr, name = "shared-open")]
fn shared_open(env: &Env, args: Value<'_>) -> Result<Board> {
    guarded(env, || {
        let mut args = Plist::new(env, "shared-open", args)?;
        let id = args.string(":id")?;
        let key = args.opt_string(":key")?.unwrap_or_else(|| id.clone());
        let scene = args.opt_string(":scene")?;
        args.finish()?;
        Board::open(&id, &key, scene.as_deref()).or_signal(env)
    })
}

/// HANDLE's overview: a heading and one hashed line per element.
#[defun(name = "shared-overview")]
fn shared_overview(env: &Env, handle: Value) -> Result<String> {
    guarded(env, || board_of(handle)?.overview().or_signal(env))
}

/// Element ID of HANDLE in full, or nil when it is not on the board.
#[defun(name = "shared-element")]
fn shared_element(env: &Env, handle: Value, id: String) -> Result<Option<String>> {
    guarded(env, || board_of(handle)?.element(&id).or_signal(env))
}

/// Apply OPS (a JSON array) to HANDLE for AUTHOR, all or none; the
/// result is (:status ok ...) or (:status conflict :conflicts ...).
#[defun(name = "shared-edit")]
fn shared_edit<'e>(
    env: &'e Env,
    handle: Value<'e>,
    ops: String,
    author: String,
) -> Result<Value<'e>> {
    guarded(env, || {
        let result = board_of(handle)?.edit(&ops, &author).or_signal(env)?;
        to_lisp(env, &result)
    })
}

/// HANDLE's scene JSON; with EXPORT the `.excalidraw` file's.
#[defun(name = "shared-scene")]
fn shared_scene(env: &Env, handle: Value, export: Value) -> Result<String> {
    guarded(env, || {
        board_of(handle)?.scene(export.is_not_nil()).or_signal(env)
    })
}

/// Make HANDLE's board SCENE (JSON) again, for AUTHOR (a rewind).
#[defun(name = "shared-restore")]
fn shared_restore<'e>(
    env: &'e Env,
    handle: Value<'e>,
    scene: String,
    author: String,
) -> Result<Value<'e>> {
    guarded(env, || {
        let result = board_of(handle)?.restore(&scene, &author).or_signal(env)?;
        to_lisp(env, &result)
    })
}

/// Draw HANDLE's board; the reply for request ID is (:png :width :height :source).
#[defun(name = "shared-render")]
fn shared_render(env: &Env, id: i64, handle: Value) -> Result<()> {
    guarded(env, || board_of(handle)?.render(id).or_signal(env))
}

/// Reply to request ID once every open page of HANDLE took its last change.
#[defun(name = "shared-synced")]
fn shared_synced(env: &Env, id: i64, handle: Value) -> Result<()> {
    guarded(env, || board_of(handle)?.synced(id).or_signal(env))
}

/// The page URL of HANDLE's board, whose scripts come from ASSETS.
#[defun(name = "shared-serve")]
fn shared_serve(env: &Env, handle: Value, assets: String) -> Result<String> {
    guarded(env, || board_of(handle)?.serve(&assets).or_signal(env))
}

/// HANDLE's discussions as text.
#[defun(name = "shared-discussions")]
fn shared_discussions(env: &Env, handle: Value) -> Result<String> {
    guarded(env, || board_of(handle)?.discussions().or_signal(env))
}

/// Add AUTHOR's TEXT to the discussion of ELEMENT on HANDLE's board.
#[defun(name = "shared-discuss")]
fn shared_discuss(
    env: &Env,
    handle: Value,
    element: String,
    author: String,
    text: String,
) -> Result<()> {
    guarded(env, || {
        board_of(handle)?
            .discuss(&element, &author, &text)
            .or_signal(env)
    })
}

/// HANDLE's history of contributions as text.
#[defun(name = "shared-history")]
fn shared_history(env: &Env, handle: Value) -> Result<String> {
    guarded(env, || board_of(handle)?.history().or_signal(env))
}

/// The image KEY of HANDLE's board as (MIME BASE64), or nil.
#[defun(name = "shared-image")]
fn shared_image<'e>(env: &'e Env, handle: Value<'e>, key: String) -> Result<Value<'e>> {
    guarded(env, || {
        match board_of(handle)?.image(&key).or_signal(env)? {
            Some((mime, data)) => env.list((mime, data)),
            None => ().into_lisp(env),
        }
    })
}

/// Close HANDLE's board: its pages go, its later calls signal.
#[defun(name = "shared-close")]
fn shared_close(env: &Env, handle: Value) -> Result<()> {
    guarded(env, || {
        board_of(handle)?.close();
        Ok(())
    })
}
